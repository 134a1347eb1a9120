"""Run records as a type: RunRecord from Store and PartsStore, the store writing a run
recorded elsewhere (merge), and `runs list/show --json` printing the rows they always did."""

from __future__ import annotations

import argparse
import json
from dataclasses import fields

import pytest

from fragility_tui.commands.runs import cmd_list, cmd_show
from fragility_tui.store.parts import PartsStore
from fragility_tui.store.runs import RunRecord, RunStatus
from fragility_tui.store.schema import RUN_FIELDS
from fragility_tui.store.store import Store


def test_a_record_has_the_runs_table_columns_in_order():
    # the table's columns, then `unreadable` (why a JSON field could not be read; not stored)
    assert tuple(f.name for f in fields(RunRecord)) == ("run_id", *RUN_FIELDS, "unreadable")


def test_store_and_parts_produce_records(tmp_path):
    store, parts = Store(tmp_path / "s.duckdb"), PartsStore(tmp_path / "parts")
    for sink in (store, parts):
        run_id = sink.create_run({"grid": "g", "model": "m", "spec": {"items": ["x"]}})
        sink.update_run(run_id, cells_done=3, provenance={"seed": 7})
        run = sink.get_run(run_id)
        assert isinstance(run, RunRecord)
        assert (run.run_id, run.grid, run.status, run.cells_done) == (run_id, "g", "queued", 3)
        assert run.spec == {"items": ["x"]} and run.provenance == {"seed": 7}
        assert [r.run_id for r in sink.runs("g")] == [run_id] and sink.runs("other") == []
        assert sink.get_run("nope") is None
    with pytest.raises(Exception):  # frozen: a record is changed through the store only
        run.status = RunStatus.RUNNING


def test_put_run_replaces_the_row_inside_the_callers_transaction(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    record = RunRecord("w-1", grid="g", model="m", status="running", spec={"shard": [0, 2]},
                       created_at="2024-01-02T03:04:05", cells_done=1)
    with store.connect(write=True) as con:
        store.put_run(record, con)
    with store.connect(write=True) as con:
        store.put_run(record.with_status("finished"), con)
    [run] = store.runs()
    assert run.status == "finished" and run.spec == {"shard": [0, 2]} and run.cells_done == 1
    with pytest.raises(RuntimeError):  # rolled back with the caller's transaction
        with store.connect(write=True) as con:
            store.put_run(RunRecord("w-2", grid="g"), con)
            raise RuntimeError("merge refused")
    assert [r.run_id for r in store.runs()] == ["w-1"]


def _old_rows(store) -> list[dict]:
    """The rows as `runs list --json` built them before records were typed."""
    with store.connect() as con:
        cur = con.execute(f"SELECT run_id, {', '.join(RUN_FIELDS)} FROM runs "
                          "ORDER BY created_at DESC, run_id")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    for row in rows:
        for k in ("spec", "provenance"):
            row[k] = json.loads(row[k]) if row[k] else {}
    return rows


def test_runs_json_prints_the_same_rows(tmp_path, capsys):
    store = Store(tmp_path / "s.duckdb")
    first = store.create_run({"grid": "g", "model": "m", "status": "finished", "pid": 1,
                              "spec": {"items": ["x"]}, "tokens": 12, "seconds": 1.5})
    store.create_run({"grid": "h", "model": "n"})
    expected = _old_rows(store)
    assert cmd_list(store, argparse.Namespace(grid=None, json=True)) == 0
    printed = capsys.readouterr().out
    assert printed == json.dumps(expected, default=str, indent=1) + "\n"
    assert list(json.loads(printed)[0]) == ["run_id", *RUN_FIELDS]
    assert cmd_show(store, argparse.Namespace(run_id=first, json=True)) == 0
    row = next(r for r in expected if r["run_id"] == first)
    assert capsys.readouterr().out == json.dumps(row, default=str, indent=1) + "\n"
    # the plain rows the provenance export writes
    assert [r.to_dict() for r in store.runs()] == expected
