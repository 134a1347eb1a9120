"""The README must not drift from the CLI: documented commands and flags exist in --help,
and the quick start's make targets exist."""

from __future__ import annotations

import re
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from helpers import REPO, run_cli

README = (REPO / "README.md").read_text()
DOCUMENTED = re.findall(r"`fragility-tui ([a-z][a-z-]*)((?: [^`]*)?)`", README)


def test_quick_start_is_two_make_targets_that_exist():
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^(make \w+)", quick, flags=re.M)
    assert commands == ["make run", "make test"]
    makefile = (REPO / "Makefile").read_text()
    for cmd in commands:
        assert re.search(rf"^{cmd.split()[1]}:", makefile, flags=re.M), cmd
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_readme_documents_commands():
    assert len({sub for sub, _ in DOCUMENTED}) >= 8


@pytest.mark.parametrize("sub, rest", DOCUMENTED, ids=[f"{s}{r}"[:60] for s, r in DOCUMENTED])
def test_documented_flags_exist_in_help(sub, rest):
    words = sub.split() + [w for w in rest.split() if re.fullmatch(r"[a-z-]+", w)][:1]
    proc = run_cli(sub, "--help")
    if proc.returncode != 0:  # e.g. "runs" needs its action: take the first documented one
        proc = run_cli(*words, "--help")
    assert proc.returncode == 0, proc.stderr
    helptext = proc.stdout
    flags = set(re.findall(r"(--[a-z][a-z-]*)", rest))
    for flag in flags:
        if flag not in helptext:  # flags of an action (runs show --json) live one level down
            nested = run_cli(*words, "--help").stdout
            assert flag in nested, f"README documents `fragility-tui {sub} {flag}`, --help lacks it"


def test_the_tour_quotes_the_shipped_real_grid(samples_db):
    """The README's int4 story is computed from sample_grids/, not typed from memory."""
    from fragility_tui.analysis.report import build_report
    from fragility_tui.store.store import Store

    cube = Store(samples_db).load_cube("starter-real")
    fp32, int4 = "smollm2-135m-instruct", "smollm2-135m-instruct+int4"
    a, b = cube.models.index(fp32), cube.models.index(int4)
    accuracy = cube.bits.mean(axis=1) * 100
    ref, qa = cube.configs.index("o0.letter"), cube.configs.index("cloze_qa")
    tour = README.split("## A five-minute tour", 1)[1].split("The same answer from the shell", 1)[0]
    tour = " ".join(tour.split())
    assert (f"int4 build scores {accuracy[b, ref]:.1f}% against the base build's "
            f"{accuracy[a, ref]:.1f}%") in tour
    assert f"the base build wins {accuracy[a, qa]:.1f}% to {accuracy[b, qa]:.1f}%" in tour
    only_fp32 = int((cube.bits[a, :, qa] & ~cube.bits[b, :, qa]).sum())
    only_int4 = int((~cube.bits[a, :, qa] & cube.bits[b, :, qa]).sum())
    assert f"{only_fp32} items only the base build gets right, {only_int4} only int4" in tour
    report = build_report(cube, pairs=[(fp32, int4)])
    decision = next(d for d in report["decisions"] if (d["a"], d["b"]) == (fp32, int4)
                    and d["target"] == "observed")
    assert decision["label"] == "harness-sensitive" and "underpowered" in decision["flags"]
    # the twin of cloze_qa with a BOS token: its interval, simultaneous over the other 47
    # configs, excludes zero (cloze_qa's own no longer does beside the extension configs)
    assert decision["harness_configs"] == ["cloze_qa+bos"] and "`cloze_qa+bos`" in tour
    low, high = (100 * x for x in decision["ci"])
    assert f"95% interval {low:.1f} to +{high:.1f}".replace("-", "−") in tour


def test_the_settings_table_lists_every_variable_with_its_default():
    """docs/architecture.md's Settings table is fragility_tui/settings.py's VARIABLES."""
    from fragility_tui import settings

    doc = (REPO / "docs" / "architecture.md").read_text()
    table = doc.split("## Settings", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(FRAGILITY_[A-Z_]+)` \| (.+?) \| (.+?) \|$", table, flags=re.M)
    assert rows == [tuple(row) for row in settings.VARIABLES]


def test_code_and_docs_cite_files_in_the_repository_only():
    """The project's brief documents (SPEC.md, DESIGN.md, …) live outside the repository: a
    reader of a clone cannot open them, so code and docs cite docs/spec.md and
    docs/architecture.md instead."""
    import subprocess

    outside = re.compile(r"\b(SPEC|DESIGN|RESOURCES|PEERS|STYLE)\.md\b")
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    hits = []
    for name in files:
        path = REPO / name
        if path.suffix not in (".py", ".md", ".toml", ".sh", ".cfg", ".txt", "") or not path.is_file():
            continue
        for k, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if outside.search(line) and name != "tests/test_docs.py":
                hits.append(f"{name}:{k}: {line.strip()}")
    assert not hits, "cites a file outside the repository:\n" + "\n".join(hits)


def test_contributing_shows_the_layers_pyproject_enforces():
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = contracts["contracts"][0]["layers"]
    text = (REPO / "CONTRIBUTING.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1].strip().splitlines()
    assert block == layers
    for target in ("make run", "make test", "make test-fast", "make bench"):
        assert f"`{target}`" in text
