"""Issue 47 item 1: a run is checked against its grid again when it starts writing, in the
transaction that creates the grid (store/grid_claim.py), not only when it was admitted;
and two runs of one model into one grid do not both compute every cell (the second waits
for the first: fragility_tui/slots.py, try_writer)."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("torch")

from fragility_tui.errors import InputError  # noqa: E402
from fragility_tui.slots import slots_folder, try_writer  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from runners.run.loop import Run  # noqa: E402
from test_run_loop import cells_of, spec_for, write_items  # noqa: E402

CONFIGS = ["o0.letter"]


def test_a_run_admitted_before_the_grid_existed_is_checked_when_it_starts(tiny_folder,
                                                                          tmp_path):
    """The queued run of the issue: admitted while `shared` did not exist, it starts after
    another run created `shared` with another item set, and is refused then."""
    store = Store(tmp_path / "s.duckdb")
    three, five = write_items(tmp_path / "a.jsonl", 3), write_items(tmp_path / "b.jsonl", 5)
    late = Run(spec_for(tiny_folder, five, grid="shared", configs=CONFIGS), store,
               display="none", events_path=str(tmp_path / "late.jsonl"))
    first = Run(spec_for(tiny_folder, three, grid="shared", configs=CONFIGS), store,
                display="none", events_path=str(tmp_path / "first.jsonl"))
    assert first.execute() == "finished"
    with pytest.raises(InputError, match="another item set"):
        late.execute()
    assert len(store.load_items("shared")) == 3
    assert {k[1] for k in cells_of(store, "shared")} == {it.item_uid for it in
                                                          store.load_items("shared")}
    assert store.get_run(late.run_id).status == "failed"


def test_a_later_seed_is_refused_when_the_run_starts(tiny_folder, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "a.jsonl", 2)
    late = Run(spec_for(tiny_folder, items, grid="shared", seed=7, configs=CONFIGS), store,
               display="none", events_path=str(tmp_path / "late.jsonl"))
    assert Run(spec_for(tiny_folder, items, grid="shared", configs=CONFIGS), store,
               display="none", events_path=str(tmp_path / "first.jsonl")).execute() == "finished"
    with pytest.raises(InputError, match="created with seed 0"):
        late.execute()
    assert store.grid_meta("shared")["seed"] == 0


def test_a_second_run_of_the_same_model_into_the_grid_waits_for_the_first(tiny_folder,
                                                                          tmp_path):
    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "a.jsonl", 2)
    held = try_writer(slots_folder(store.path), "g", "tiny-llama", "run-first pid 1")
    assert not isinstance(held, str)
    run = Run(spec_for(tiny_folder, items, configs=CONFIGS), store, display="none",
              events_path=str(tmp_path / "ev.jsonl"))
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(run.execute()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = store.get_run(run.run_id)
        if row.status == "queued" and row.note:
            break
        time.sleep(0.1)
    assert "run-first" in row.note and "tiny-llama" in row.note and "'g'" in row.note
    time.sleep(1.5)  # still waiting: nothing computed while the first writer holds it
    assert store.get_run(run.run_id).status == "queued" and not cells_of(store, "g")
    held.release()
    thread.join(120)
    assert outcome == ["finished"] and len(cells_of(store, "g")) == 2


def test_no_wait_refuses_a_busy_writer_before_the_run_row(tiny_folder, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "a.jsonl", 1)
    held = try_writer(slots_folder(store.path), "g", "tiny-llama", "run-first pid 1")
    with pytest.raises(InputError, match="being written into grid 'g', held by run "
                                         "run-first; not waiting"):
        Run(spec_for(tiny_folder, items, configs=CONFIGS), store, display="none", wait=False)
    assert not store.runs()
    held.release()
    run = Run(spec_for(tiny_folder, items, configs=CONFIGS), store, display="none",
              wait=False, events_path=str(tmp_path / "ev.jsonl"))
    assert run.execute() == "finished"
