"""Issue 47 item 5: when the disk is too full even for the run row's last update, the row
cannot say `failed`; docs/runner.md (Errors) says what the user then sees: the row keeps
`running` (shown as `died` once the process is gone), the `failed` event and the error line
say "disk full", and a resume completes the grid."""

from __future__ import annotations

import errno
import json

import pytest

pytest.importorskip("torch")

from fragility_tui.store.store import Store  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402
from test_run_loop import cells_of, spec_for, write_items  # noqa: E402


def test_a_disk_too_full_for_the_run_row(tiny_folder, tmp_path, monkeypatch):
    items = write_items(tmp_path / "items.jsonl", 4)
    store = Store(tmp_path / "s.duckdb")
    write, update = Store.write_cell_table, Store.update_run
    full = {"batches": 0, "now": False}

    def write_until_full(table, con):
        full["batches"] += 1
        if full["batches"] == 2:
            full["now"] = True
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(table, con)

    def update_unless_full(self, run_id, **fields):
        if full["now"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return update(self, run_id, **fields)

    monkeypatch.setattr(Store, "write_cell_table", staticmethod(write_until_full))
    monkeypatch.setattr(Store, "update_run", update_unless_full)
    run = Run(spec_for(tiny_folder, items, configs=["o0.letter"]), store, display="none",
              events_path=str(tmp_path / "ev.jsonl"))
    with pytest.raises(OSError):
        run.execute()
    monkeypatch.setattr(Store, "write_cell_table", staticmethod(write))
    monkeypatch.setattr(Store, "update_run", update)
    row = store.get_run(run.run_id)
    assert row.status == "running"  # the row could not be updated: `died` once the pid is gone
    event = json.loads((tmp_path / "ev.jsonl").read_text().splitlines()[-1])
    assert event["event"] == "failed" and event["reason"].startswith("disk full")
    resumed = Run(RunSpec.from_dict(row.spec), store, run_id=run.run_id, display="none")
    assert resumed.execute() == "finished" and len(cells_of(store, "g")) == 4
