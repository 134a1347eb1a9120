"""The Foundation CLI as a user runs it: simulate, grids, import, export, bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fragility_tui.store.store import Store
from helpers import REPO, run_cli

BAD_GRIDS = Path(__file__).parents[1] / "store" / "bad_grids"
EXPECTED_ERRORS = {
    "missing_column.csv": "missing required column(s) correct",
    "unknown_config.csv": "row 2, column 'config': unknown config id 'o9.letter'",
    "duplicate_cell.csv": "row 3, column 'item': duplicate cell",
    "non_boolean.csv": "row 2, column 'correct'",
    "empty.csv": "empty file",
    "header_only.csv": "no rows",
    "invalid_utf8.csv": "invalid_utf8.csv:3: invalid UTF-8",
    "ragged_row.csv": "malformed CSV",
    "pred_out_of_range.csv": "row 2, column 'pred': must be -1..3",
    "empty_model.csv": "row 2, column 'model': empty value",
    "corrupt.parquet": "cannot read Parquet",
    "wrong_extension.json": "unsupported grid format",
}


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("cli") / "store.duckdb"
    run_cli("simulate", "--models", "3", "--items", "40", "--seed", "1", "--grid", "sim",
            db=db, check=True)
    return db


def _grid_snapshot(db):
    """What `grids --json` prints (that command is run in test_simulate_and_grids_json),
    read here: the before-and-after look of a refused import, two CLI starts fewer."""
    return json.loads(json.dumps([g.to_json() for g in Store(db).list_grids()]))


def test_simulate_and_grids_json(small_db):
    grids = json.loads(run_cli("grids", "--json", db=small_db, check=True).stdout)
    assert grids == _grid_snapshot(small_db)
    assert [g["name"] for g in grids] == ["sim"]
    g = grids[0]
    assert (g["models"], g["items"], g["configs"], g["complete"], g["synthetic"]) == (3, 40, 26, True, True)
    assert "SYNTHETIC" in g["description"]
    text = run_cli("grids", db=small_db, check=True).stdout
    assert "SYNTHETIC" in text and "sim" in text


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_import_round_trip(small_db, tmp_path, fmt):
    out = tmp_path / f"cells.{fmt}"
    run_cli("export", "--grid", "sim", "--what", "cells", "--format", fmt, "--out", str(out),
            db=small_db, check=True)
    if fmt == "csv":
        with open(out) as fh:
            rows = list(csv.DictReader(fh))
        assert list(rows[0])[:7] == ["model", "item", "benchmark", "config", "correct", "pred",
                                     "raw_output"]  # the contract's columns first
    else:
        rows = pq.read_table(out).to_pylist()
    assert len(rows) == 3 * 40 * 26
    db2 = tmp_path / "other.duckdb"
    run_cli("import", str(out), "--grid", "copy", db=db2, check=True)
    from fragility_tui.store.store import Store

    a, b = Store(small_db).load_cube("sim"), Store(db2).load_cube("copy")
    assert a.models == b.models and a.items == b.items and a.configs == b.configs
    assert (a.bits == b.bits).all() and b.present.all()
    assert list(a.benchmarks) == list(b.benchmarks)


def test_import_refuses_existing_grid_without_replace(small_db, tmp_path):
    out = tmp_path / "cells.parquet"
    run_cli("export", "--grid", "sim", "--format", "parquet", "--out", str(out), db=small_db, check=True)
    proc = run_cli("import", str(out), "--grid", "sim", db=small_db)
    assert proc.returncode == 2 and "already exists" in proc.stderr


@pytest.mark.parametrize("name", sorted(EXPECTED_ERRORS))
def test_bad_grid_files_give_one_clear_error_and_leave_store_unchanged(small_db, name):
    before = _grid_snapshot(small_db)
    proc = run_cli("import", str(BAD_GRIDS / name), "--grid", "bad", db=small_db)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert EXPECTED_ERRORS[name] in lines[0], lines[0]
    assert name in lines[0]
    assert _grid_snapshot(small_db) == before


def test_bad_grid_corpus_is_documented():
    listed = (BAD_GRIDS / "README.md").read_text()
    assert all(f"| {name} |" in listed for name in EXPECTED_ERRORS)
    assert {p.name for p in BAD_GRIDS.iterdir()} - {"README.md"} == set(EXPECTED_ERRORS)


def test_usage_errors_exit_2(small_db):
    proc = run_cli("import", db=small_db)
    assert proc.returncode == 2 and "error:" in proc.stderr
    # argparse's own errors are one line too (the README's promise), naming the command's
    # --help; a path after a command's options is told where it goes
    for args, said in ((["report", "--grid"], "argument --grid: expected one argument "
                        "(`fragility-tui report --help` lists the options)"),
                       (["import-log", "a.jsonl", "--grid", "g", "b.jsonl"],
                        "unrecognized arguments: b.jsonl (`fragility-tui import-log --help` "
                        "lists the options; its paths go before its options)"),
                       (["reprt"], "invalid choice: 'reprt'")):
        proc = run_cli(*args, db=small_db)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith("error: ") and said in proc.stderr, proc.stderr
    proc = run_cli("export", "--grid", "nope", "--out", "/tmp/x.csv", db=small_db)
    assert proc.returncode == 2 and proc.stderr.startswith("error: no grid named 'nope'")


def test_shipped_sample_grid_loads(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("load-samples", db=db, check=True)
    grids = {g["name"]: g for g in _grid_snapshot(db)}
    g = grids["synthetic-12x3679"]
    assert (g["models"], g["items"], g["configs"], g["complete"], g["synthetic"]) == (12, 3679, 26, True, True)
    from fragility_tui.store.store import Store

    item = Store(db).load_items("synthetic-12x3679")[0]
    assert item.question.startswith("Synthetic ") and len(item.choices) == 4
    truth = Store(db).grid_meta("synthetic-12x3679")["truth"]  # what the generator drew
    assert sorted(v["true_rank"] for v in truth["models"].values()) == list(range(1, 13))
    assert truth["item_uids"][0] == item.item_uid and len(truth["discrimination"]) == 3679
    real = grids["starter-real"]  # Issue 6: 4 real models x >= 240 items x 26 configs, complete
    # (issue 56: and the 22 extension configs)
    assert (real["models"], real["items"], real["configs"], real["complete"],
            real["synthetic"]) == (4, 265, 48, True, False)
    store = Store(db)
    assert {r.status for r in store.runs("starter-real")} == {"finished"}
    models = {m["model"]: m for m in store.list_models("starter-real")}
    assert set(models) == {"smollm2-135m-instruct", "smollm2-135m-instruct+int8",
                           "smollm2-135m-instruct+int4", "gemma3-270m"}
    assert models["smollm2-135m-instruct+int4"]["base_model"] == "smollm2-135m-instruct"
    assert models["smollm2-135m-instruct+int8"]["quantization"] == "optimum-quanto qint8 weights"
    assert all(m["provenance"]["weights_sha256"] for m in models.values())  # SPEC 10 travelled
    assert store.get_item("starter-real", store.load_items("starter-real")[0].item_uid).question
    # One report builder: the export carries the cost section that `report` prints.
    out = tmp_path / "report.md"
    run_cli("export", "--grid", "starter-real", "--what", "report", "--format", "markdown",
            "--out", str(out), db=db, check=True)
    printed = run_cli("report", "--grid", "starter-real", "--markdown", "--boot", "2000",
                      db=db, check=True).stdout
    assert "Cost per item" in out.read_text() and "Cost per item" in printed


def test_shipped_sample_grid_matches_its_generator():
    """sample_grids/ holds exactly what `make synthetic-grid` regenerates."""
    from fragility_tui.grid.simulate import simulate

    grid = simulate(12, 3679, 0)
    cube = grid.cube
    table = pq.read_table(REPO / "sample_grids" / "synthetic-12x3679.parquet")
    assert table.num_rows == cube.bits.size
    models = table.column("model").to_pylist()
    items = table.column("item").to_pylist()
    configs = table.column("config").to_pylist()
    correct = table.column("correct").to_pylist()
    pred = table.column("pred").to_pylist()
    m_idx = {m: k for k, m in enumerate(cube.models)}
    i_idx = {u: k for k, u in enumerate(cube.items)}
    c_idx = {c: k for k, c in enumerate(cube.configs)}
    for row in range(0, table.num_rows, 997):
        cell = m_idx[models[row]], i_idx[items[row]], c_idx[configs[row]]
        assert cube.bits[cell] == correct[row] and grid.pred[cell] == pred[row]
    assert sum(correct) == int(cube.bits.sum())


MALFORMED_ITEMS = Path(__file__).parents[1] / "items" / "malformed"


@pytest.mark.parametrize("name", sorted(p.name for p in MALFORMED_ITEMS.iterdir()
                                        if p.name != "README.md"))
def test_malformed_item_files_fail_import_cleanly(small_db, tmp_path, name):
    """`import --items BAD` → one `error:` line naming the file, exit 2, store unchanged."""
    grid = tmp_path / "grid.csv"
    grid.write_text("model,item,config,correct\nm,toy/q1,o0.letter,1\n")
    before = _grid_snapshot(small_db)
    proc = run_cli("import", str(grid), "--grid", "with-items", "--items",
                   str(MALFORMED_ITEMS / name), db=small_db)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and name in lines[0], proc.stderr
    assert _grid_snapshot(small_db) == before


def test_import_attaches_item_text(tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "q1", "benchmark": "toy", "subject": null, "question": "Two plus two?",'
                     ' "choices": ["3", "4", "5", "22"], "gold": 1}\n')
    grid = tmp_path / "grid.csv"
    grid.write_text("model,item,config,correct\nm,q1,o0.letter,true\nm,toy/q1,cloze_qa,false\n"
                    .replace("m,q1", "m,toy/q1", 1))
    db = tmp_path / "s.duckdb"
    proc = run_cli("import", str(grid), "--grid", "g", "--items", str(items), db=db, check=True)
    assert "1 kept of 1 read" in proc.stderr
    from fragility_tui.store.store import Store

    item = Store(db).get_item("g", "toy/q1")
    assert item.question == "Two plus two?" and item.choices == ("3", "4", "5", "22") and item.gold == 1
    missing = tmp_path / "grid2.csv"
    missing.write_text("model,item,config,correct\nm,toy/zz,o0.letter,true\n")
    proc = run_cli("import", str(missing), "--grid", "g2", "--items", str(items), db=db)
    assert proc.returncode == 2 and "not in the --items file" in proc.stderr
