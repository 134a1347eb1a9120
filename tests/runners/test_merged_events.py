"""Issue 47 item 5: a merged run's events path is its own parts folder's events file, not
whatever its run record names (a record naming /dev/zero made the app read without end)."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("torch")

from fragility_tui.store.merge import merge_parts  # noqa: E402
from fragility_tui.store.parts import PartsStore, visible_files  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from runners.run.loop import Run  # noqa: E402
from test_run_loop import spec_for, write_items  # noqa: E402


def test_a_merged_run_reads_events_only_from_its_own_folder(tiny_folder, tmp_path):
    items = write_items(tmp_path / "items.jsonl", 1)
    folder = tmp_path / "parts"
    run = Run(spec_for(tiny_folder, items, configs=["o0.letter"]), PartsStore(folder),
              display="none")
    assert run.execute() == "finished"
    [record] = visible_files(folder / "runs", "*.json")
    doc = json.loads(record.read_text())
    doc["events_path"] = "/dev/zero"
    record.write_text(json.dumps(doc))
    store = Store(tmp_path / "s.duckdb")
    merge_parts(store, [folder], "g")
    own = (folder / "events" / f"{run.run_id}.jsonl").resolve()
    assert store.get_run(run.run_id).events_path == str(own)
    # A copy of the folder without its events: no events path at all.
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    shutil.rmtree(copy / "events")
    merge_parts(store, [copy], "g")
    assert store.get_run(run.run_id).events_path is None
