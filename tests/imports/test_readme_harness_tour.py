"""The README's paragraph on other harnesses' logs runs as written and every figure it
quotes is what the commands print (real lm-eval and Inspect logs in tests/fixtures/logs)."""

from __future__ import annotations

import json
import re

from helpers import REPO, run_cli

README = (REPO / "README.md").read_text()
SECTION = README.split("Your evidence from other harnesses", 1)[1].split(
    "And a grid of your own", 1)[0]
PROSE = " ".join(SECTION.split())


def _commands() -> list[list[str]]:
    block = SECTION.split("```bash", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    logs = str(REPO / "tests" / "fixtures" / "logs")
    lines = [line.strip().replace("$F", logs) for line in block.splitlines()]
    return [line.split()[1:] for line in lines if line.startswith("fragility-tui")]


def test_the_readme_harness_tour_prints_what_it_quotes(tmp_path):
    db = tmp_path / "s.duckdb"
    commands = _commands()
    assert [c[0] for c in commands] == ["import-log", "import-log", "harnesses", "report"]
    outputs = []
    for args in commands:
        args = [str(REPO / a) if a.startswith("sample_grids/") else a for a in args]
        outputs.append(run_cli(*args, db=db, check=True).stdout)
    assert "reproduces the log's accuracy 0.475" in outputs[0]
    text = json.loads(run_cli(*commands[2], "--json", db=db, check=True).stdout)
    acc = {c: round(100 * v, 1) for h in text["accuracy"].values() for c, v in h.items()}
    quoted = [float(x) for x in re.findall(r"(\d+\.\d)% ", SECTION)[:3]]
    assert quoted == [acc["lm-eval:fragility_starter:acc_norm+k0"],
                      acc["lm-eval:fragility_starter_gen:exact_match-first_letter+k0"],
                      acc["inspect:fragility_mc:choice"]]
    assert text["agree_right"] == 0 and f"{text['agree_wrong']} are wrong under all" in PROSE
    report = outputs[3]
    row = next(line for line in report.splitlines()
               if line.startswith("smollm2  gemma  observed"))
    delta, low, high = re.findall(r"[−-]?\d+\.\d", row)[:3]
    assert f"by {delta} points" in PROSE and "underpowered" in row
    # report prints ASCII minus signs (grep-able); the README's prose sets them as "−"
    assert f"{low.replace('-', '−')} to +{high}" in PROSE
    detail = json.loads(run_cli(*commands[3], "--json", db=db, check=True).stdout)
    (pair,) = detail["pair_details"]
    assert (pair["accuracy_a"], pair["accuracy_b"]) == (0.475, 0.425)
    assert "47.5% to 42.5%" in PROSE
    assert f"{pair['only_a']} items only SmolLM2 gets right, {pair['only_b']} only Gemma" \
        in PROSE
