"""Issue 24 (12): `grids delete NAME` and `runs delete RUN_ID` delete only with --yes; without
it they say what would go and delete nothing (exit 2); a live run is never deleted."""

from __future__ import annotations

import os

from fragility_tui.processes import process_start
from fragility_tui.store.store import Store
from helpers import run_cli


def make_store(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("simulate", "--models", "2", "--items", "10", "--grid", "sim", db=db, check=True)
    run_cli("simulate", "--models", "2", "--items", "10", "--grid", "other", db=db, check=True)
    store = Store(db)
    run_id = store.create_run({"grid": "sim", "model": "m", "status": "cancelled"})
    return db, store, run_id


def test_grids_delete_asks_for_yes_then_deletes_the_grid_and_its_runs(tmp_path):
    db, store, run_id = make_store(tmp_path)
    out = run_cli("grids", "delete", "sim", db=db)
    assert out.returncode == 2 and "--yes" in out.stderr and "1 run record" in out.stderr
    assert store.has_grid("sim") and store.get_run(run_id)
    out = run_cli("grids", "delete", "sim", "--yes", db=db, check=True)
    assert "deleted grid 'sim'" in out.stdout
    assert not store.has_grid("sim") and store.get_run(run_id) is None
    assert store.has_grid("other") and store.count_cells("other") == 2 * 10 * 26
    assert store.count_cells("sim") == 0
    out = run_cli("grids", "delete", "sim", "--yes", db=db)
    assert out.returncode == 2 and "no grid named 'sim'" in out.stderr


def test_grids_delete_of_a_grid_without_runs(tmp_path):
    """Issue 44: a simulated grid has no run records; deleting it must not crash."""
    db, store, _ = make_store(tmp_path)
    out = run_cli("grids", "delete", "other", "--yes", db=db)
    assert out.returncode == 0, out.stderr
    assert "0 run record(s)" in out.stdout and "Traceback" not in out.stderr
    assert not store.has_grid("other") and store.has_grid("sim")


def test_runs_delete_asks_for_yes_and_keeps_the_cells(tmp_path):
    db, store, run_id = make_store(tmp_path)
    out = run_cli("runs", "delete", run_id, db=db)
    assert out.returncode == 2 and "--yes" in out.stderr and store.get_run(run_id)
    out = run_cli("runs", "delete", run_id, "--yes", db=db, check=True)
    assert run_id in out.stdout and store.get_run(run_id) is None
    assert store.count_cells("sim") == 2 * 10 * 26


def test_a_live_run_and_its_grid_are_not_deleted(tmp_path):
    db, store, run_id = make_store(tmp_path)
    store.update_run(run_id, status="running", pid=os.getpid(),
                     pid_started=process_start(os.getpid()))
    for args in (("runs", "delete", run_id, "--yes"), ("grids", "delete", "sim", "--yes")):
        out = run_cli(*args, db=db)
        assert out.returncode == 2 and "runs cancel" in out.stderr, out.stderr
    assert store.get_run(run_id) and store.has_grid("sim")
