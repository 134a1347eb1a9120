"""`fragility-tui report` and `selfcheck` through the CLI, on a store holding a tiny grid."""

from __future__ import annotations

import json

import pytest
from analysis_grids import TINY, TINY_BENCHMARKS, TINY_CONFIGS

from fragility_tui.cli import main
from fragility_tui.items.item import Item
from fragility_tui.store.store import CellRow, Store


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "store.duckdb"
    store = Store(path)
    store.create_grid("tiny")
    uids = [f"{b}/i{k + 1}" for k, b in enumerate(TINY_BENCHMARKS)]
    store.add_items("tiny", [Item(u, b, None, f"q{k}", ("a", "b", "c", "d"), 0)
                             for k, (u, b) in enumerate(zip(uids, TINY_BENCHMARKS))])
    rows = [CellRow(m, uids[i], c, cells[i][j] == "1", pred=0)
            for m, cells in TINY.items() for i in range(len(uids))
            for j, c in enumerate(TINY_CONFIGS)]
    store.write_cells("tiny", rows)
    return str(path)


def report(db, capsys, *args):
    code = main(["report", "--grid", "tiny", "--db", db, "--boot", "100", "--random-draws", "20",
                 *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_report(db, capsys):
    code, out, _ = report(db, capsys, "--json")
    assert code == 0
    r = json.loads(out)
    assert r["grid"]["name"] == "tiny" and r["grid"]["models"] == ["m1", "m2", "m3"]
    assert r["pairs"][0]["gap"] == 1 and r["pairs"][1]["verdict"] == "cancel"
    assert r == json.loads(report(db, capsys, "--json")[1])  # same seed, same bytes
    assert out == report(db, capsys, "--json")[1]


def test_selection_and_pair(db, capsys):
    code, out, _ = report(db, capsys, "--json", "--configs", "o0.letter,o1.letter",
                          "--models", "m1,m2", "--benchmarks", "b1", "--pair", "m2,m1")
    assert code == 0
    r = json.loads(out)
    assert r["grid"]["configs"] == ["o0.letter", "o1.letter"] and r["grid"]["n_items"] == 3
    assert [(p["a"], p["b"]) for p in r["pairs"]] == [("m1", "m2"), ("m2", "m1")]


def test_text_and_markdown(db, capsys):
    code, out, _ = report(db, capsys)
    assert code == 0 and "Bands" in out and max(map(len, out.splitlines())) <= 100
    code, out, _ = report(db, capsys, "--markdown")
    assert code == 0 and out.startswith("### Grid")


@pytest.mark.parametrize("args, field", [
    (["--models", "m1,nobody"], "--models"),
    (["--benchmarks", "mmlu"], "--benchmarks"),
    (["--configs", "o1.letter,cloze_qa"], "--configs"),
    (["--configs", "o0.letter,bogus"], "--configs"),
    (["--configs", "o0.letter,o3.digit"], "--configs"),
    (["--pair", "m1"], "--pair"),
    (["--pair", "m1,nobody"], "--pair"),
    (["--boot", "0"], "--boot"),
])
def test_bad_input_exits_2_naming_the_flag(db, capsys, args, field):
    code, out, err = report(db, capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("error:") and field in err and len(err.strip().splitlines()) == 1


def test_unknown_grid(db, capsys):
    assert main(["report", "--grid", "nope", "--db", db]) == 2
    assert "nope" in capsys.readouterr().err


def test_selfcheck_decisions(capsys):
    code = main(["selfcheck", "decisions", "--replicates", "12", "--boot", "150"])
    out = capsys.readouterr().out
    assert code == 0, out
    for name in ("stable gap", "no gap", "harness reversal", "target-sensitive mix",
                 "missing support", "gap at m", "gap at 1.5 m", "no gap, harness effects"):
        assert name in out
    assert "no checked scenario failed" in out or "every checked scenario passed" in out
    assert "power rows left out" in out and "95% bound" in out


def test_json_is_byte_identical_across_processes(db):
    """Hash randomisation or any process-level state must not leak into the report."""
    import os
    import subprocess
    import sys

    outs = []
    for hash_seed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-m", "fragility_tui.cli", "report", "--grid", "tiny", "--json",
             "--db", db, "--boot", "100", "--random-draws", "20", "--pair", "m3,m1"],
            capture_output=True, env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1]


def test_selfcheck_fails_when_a_modal_label_is_wrong(capsys, monkeypatch):
    import dataclasses

    from fragility_tui.analysis import controlled

    wrong = (dataclasses.replace(controlled.SCENARIOS[0], expected="underpowered"),)
    real = controlled.run_check
    monkeypatch.setattr(controlled, "run_check",
                        lambda **kw: real(**kw, scenarios=wrong))
    code = main(["selfcheck", "decisions", "--replicates", "5", "--boot", "100"])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED: error rate above 15% in stable gap" in out


def test_selfcheck_as_a_user_runs_it_prints_procedure_and_fair_baseline():
    """Subprocess, default (quick) settings but fewer replicates: at least seven scenarios,
    each with both columns, a Wilson interval on each rate, and the power rows."""
    import re

    from helpers import run_cli

    proc = run_cli("selfcheck", "decisions", "--replicates", "8", "--boot", "100",
                   timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "procedure" in out and "fair baseline" in out
    head = next(line for line in out.splitlines() if line.startswith("scenario"))
    assert head.split() == ["scenario", "known", "state", "procedure", "fair", "baseline",
                            "check"]
    rate = r"\s*\d+\.\d% \[\s*\d+\.\d,\s*\d+\.\d\]"
    rows = [line for line in out.splitlines()
            if re.search(rf"{rate}\s+{rate}\s+(pass|undecided|power|FAIL)", line)]
    assert len(rows) >= 7
    assert sum(line.rstrip().endswith("power") for line in rows) == 3
    assert "gap at 1.5 m, correlated".split(",")[0] in out and "no gap, correlated" in out
    assert "8 replicates per scenario, 100 bootstrap resamples" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_selfcheck_rejects_bad_sizes():
    from helpers import run_cli

    proc = run_cli("selfcheck", "decisions", "--replicates", "0")
    assert proc.returncode == 2 and "--replicates" in proc.stderr
