"""Issue 24 (1)-(3): nothing typed by mistake damages a grid or a run record. Each refusal
happens before the run row is written or a model is prepared, so these need no model: the
model specs below would fail later, and the tests check that the refusal came first."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fragility_tui.items.item import item_set_hash
from fragility_tui.items.loaders import load_items
from fragility_tui.store.store import Store
from helpers import REPO, run_cli

SHIPPED_RUN = "20261130-083513-2e9ee9"  # starter-real, smollm2-135m-instruct+int4, finished
STARTER = REPO / "sample_grids" / "starter_items.jsonl"


@pytest.fixture(scope="module")
def shipped_db(tmp_path_factory, samples_template) -> Path:
    """A fresh store holding the shipped grids (synthetic-12x3679, starter-real + its runs),
    as `load-samples` leaves it (tests/conftest.py)."""
    db = tmp_path_factory.mktemp("guards") / "store.duckdb"
    shutil.copyfile(samples_template, db)
    return db


@pytest.fixture
def store_copy(shipped_db, tmp_path) -> Path:
    db = tmp_path / "store.duckdb"
    shutil.copy(shipped_db, db)
    return db


def cli_in(cwd: Path, *args: str, db: Path):
    """The CLI started from another folder than the repository (as a user does)."""
    import subprocess
    import sys

    env = {**os.environ, "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "fragility_tui.cli", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def snapshot(db: Path) -> tuple:
    store = Store(db)
    runs = json.dumps([r.to_dict() for r in store.runs()], default=str, sort_keys=True)
    grids = [g.to_json() for g in store.list_grids()]
    return runs, grids, store.count_cells()


def test_a_finished_shipped_run_refuses_resume_from_any_folder(store_copy, tmp_path):
    before = snapshot(store_copy)
    out = cli_in(tmp_path, "run", "--resume", SHIPPED_RUN, "--display", "none", db=store_copy)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: ") and "is finished" in out.stderr
    assert "nothing to resume" in out.stderr
    assert snapshot(store_copy) == before  # status, times, counts: untouched


def test_a_resume_whose_items_are_missing_fails_before_changing_the_record(tmp_path):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    run_id = store.create_run({"grid": "g", "model": "m", "status": "cancelled",
                               "cells_done": 3, "cells_total": 10, "seconds": 12.5,
                               "spec": {"models": ["no/such/thing/here"],
                                        "items": [str(tmp_path / "gone.jsonl")], "grid": "g"}})
    before = snapshot(db)
    out = run_cli("run", "--resume", run_id, "--display", "none", db=db)
    assert out.returncode == 2 and "gone.jsonl" in out.stderr, out.stderr
    assert snapshot(db) == before
    assert Store(db).get_run(run_id).status == "cancelled"


def test_a_shipped_runs_relative_items_resolve_from_any_folder(tmp_path, monkeypatch):
    """A shipped record names `sample_grids/starter_items.jsonl`, relative to the repository:
    from another folder it still loads (before: 'no such file', and the run marked failed)."""
    from runners.run.admission import load_run_items
    from runners.run.loop import RunSpec

    monkeypatch.chdir(tmp_path)
    spec = RunSpec(models=["m"], items=["sample_grids/starter_items.jsonl"], grid="g",
                   per_benchmark=None)
    loaded = load_run_items(spec)
    assert len(loaded.items) == len(load_items(STARTER)[0]) > 0


def test_new_runs_record_absolute_item_paths(tmp_path, monkeypatch):
    from fragility_tui.commands.run import spec_from_args
    from fragility_tui.cli import build_parser

    monkeypatch.chdir(REPO)
    args = build_parser().parse_args(["run", "--model", "m", "--grid", "g", "--items",
                                      "sample_grids/starter_items.jsonl", "--items", "hub:x"])
    assert spec_from_args(args).items == [str(STARTER), "hub:x"]


def test_a_synthetic_grid_refuses_runner_cells(store_copy):
    before = snapshot(store_copy)
    out = run_cli("run", "--model", "smollm2-135m-instruct", "--grid", "synthetic-12x3679",
                  "--display", "none", db=store_copy)
    assert out.returncode == 2, out.stderr
    assert "SYNTHETIC" in out.stderr and "synthetic-12x3679" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert snapshot(store_copy) == before  # no run row, no item, no model


def write_items(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "benchmark": "toy", "question": f"q {i}?",
                                        "choices": ["a", "b", "c", "d"], "gold": 0}) + "\n"
                            for i in ids))
    return path


def grid_with_items(db: Path, items_path: Path) -> str:
    items, _ = load_items(items_path)
    store = Store(db)
    set_hash = item_set_hash(items)
    store.create_grid("g", item_set_hash=set_hash)
    store.add_items("g", items)
    return set_hash


def test_another_item_set_is_refused_naming_both_hashes(tmp_path):
    db = tmp_path / "s.duckdb"
    first = grid_with_items(db, write_items(tmp_path / "a.jsonl", ["x1", "x2"]))
    other = write_items(tmp_path / "b.jsonl", ["y1", "y2", "y3"])
    other_hash = item_set_hash(load_items(other)[0])
    before = snapshot(db)
    out = run_cli("run", "--model", "no/such/thing/here", "--items", str(other), "--grid", "g",
                  "--display", "none", db=db)
    assert out.returncode == 2, out.stderr
    assert first[:12] in out.stderr and other_hash[:12] in out.stderr
    assert "--add-items" in out.stderr
    assert snapshot(db) == before


def test_an_imported_grid_without_a_recorded_hash_compares_its_stored_items(tmp_path):
    from runners.run.admission import check_grid
    from runners.run.loop import RunSpec

    store = Store(tmp_path / "s.duckdb")
    items, _ = load_items(write_items(tmp_path / "a.jsonl", ["x1", "x2"]))
    store.create_grid("g")  # as import does: no item-set hash
    store.add_items("g", items)
    spec = RunSpec(models=["m"], items=[], grid="g")
    assert check_grid(store, spec, item_set_hash(items)) is None
    with pytest.raises(Exception, match="another item set"):
        check_grid(store, spec, item_set_hash(items[:1]))


def test_add_items_lets_the_run_through_saying_the_grid_becomes_partial(tmp_path):
    from runners.run.admission import check_grid
    from runners.run.loop import RunSpec

    db = tmp_path / "s.duckdb"
    grid_with_items(db, write_items(tmp_path / "a.jsonl", ["x1"]))
    other = write_items(tmp_path / "b.jsonl", ["y1"])
    spec = RunSpec(models=["m"], items=[str(other)], grid="g", add_items=True)
    note = check_grid(Store(db), spec, item_set_hash(load_items(other)[0]))
    assert note and "partial" in note
    # The CLI passes the item check and stops at the model (which does not exist here).
    out = run_cli("run", "--model", "no/such/thing/here", "--items", str(other), "--grid", "g",
                  "--add-items", "--display", "none", db=db)
    assert out.returncode == 2 and "not found" in out.stderr, out.stderr


def test_a_typo_in_items_leaves_no_run_row(tmp_path):
    db = tmp_path / "s.duckdb"
    out = run_cli("run", "--model", "smollm2-135m-instruct", "--items", "no-such-items.jsonl",
                  "--grid", "new", "--display", "none", db=db)
    assert out.returncode == 2 and "no-such-items.jsonl" in out.stderr, out.stderr
    store = Store(db)
    assert store.runs() == [] and not store.has_grid("new")
