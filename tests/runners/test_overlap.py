"""Host work beside the model calls (runners/run/host_work.py, batch_loop.py): the same run with
overlap on and off gives identical cells; writes happen on the host worker, in batch order;
a worker's error reaches the main thread with its traceback and the batches before it are
committed; the timing record says how long no model call was in flight."""

from __future__ import annotations

import threading
import traceback

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.store.store import Store  # noqa: E402
from runners.plan.item_requests import ItemPlanner  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402
from test_run_loop import write_items  # noqa: E402


def every_cell(store: Store) -> dict:
    with store.connect() as con:
        rows = con.execute("SELECT item_uid, config_id, correct, pred, permutation, raw_output, "
                           "scores, tokens, prompt_sha, margin, near_tie FROM cells").fetchall()
    return {r[:2]: r[2:] for r in rows}


def run(folder, items, db, **kw):
    spec = RunSpec(models=[str(folder)], items=[str(items)], grid="g", per_benchmark=None,
                   threads=1, batch_size=2, prompt_mode="chat", **kw)
    store = Store(db)
    job = Run(spec, store, display="none", events_path=str(db) + ".events")
    return job, job.execute(), store


def test_overlap_on_and_off_give_bit_identical_cells(tiny_folder, tmp_path, monkeypatch):
    items = write_items(tmp_path / "items.jsonl", 5)
    writers = []
    original = Store.write_cells

    def note_thread(self, grid, rows, con=None):
        if con is None:  # the outer call (it calls itself inside its transaction)
            writers.append((threading.current_thread() is threading.main_thread(),
                            sorted({r.item_uid for r in rows})))
        return original(self, grid, rows, con)

    monkeypatch.setattr(Store, "write_cells", note_thread)
    on_run, status, on = run(tiny_folder, items, tmp_path / "on.duckdb")
    assert status == "finished"
    on_writes, writers[:] = list(writers), []
    off_run, status, off = run(tiny_folder, items, tmp_path / "off.duckdb", overlap=False)
    assert status == "finished"
    a, b = every_cell(on), every_cell(off)
    assert len(a) == 5 * 26
    assert a == b  # every column exactly: scores, raw outputs, margins (fp32, same batches)
    # With overlap the worker writes; without, the loop's own thread; same batches in order.
    assert [main for main, _ in on_writes] == [False] * 3
    assert [main for main, _ in writers] == [True] * 3
    assert [uids for _, uids in on_writes] == [uids for _, uids in writers]
    for job, store, overlap in ((on_run, on, True), (off_run, off, False)):
        provenance = store.get_run(job.run_id).provenance
        assert provenance["overlap"] is overlap
        timing = provenance["host_overlap"]["tiny-llama"]
        assert timing["overlap"] is overlap and timing["items"] == 5
        assert 0 < timing["model_call_s"] < timing["wall_s"]
        assert 0 <= timing["no_model_call_share"] < 1 and timing["host_ms_per_item"] > 0
        assert 0 < timing["first_batch_wait_s"] < timing["wall_s"] - timing["model_call_s"]
        assert provenance["sessions"][-1]["host_overlap"]["tiny-llama"] == timing


def test_a_planning_error_is_raised_in_the_main_thread_with_its_traceback(
        tiny_folder, tmp_path, monkeypatch):
    items = write_items(tmp_path / "items.jsonl", 5)
    original = ItemPlanner._plan
    planned = {"n": 0, "thread": None}

    def fail_on_fourth(self):
        planned["n"] += 1
        if planned["n"] == 4:
            planned["thread"] = threading.current_thread().name
            raise ValueError("template exploded")
        return original(self)

    monkeypatch.setattr(ItemPlanner, "_plan", fail_on_fourth)
    with pytest.raises(ValueError, match="template exploded") as caught:
        run(tiny_folder, items, tmp_path / "s.duckdb")
    assert planned["thread"].startswith("fragility-host")  # it happened on the worker
    frames = [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert "fail_on_fourth" in frames  # the worker's own frames came along
    store = Store(tmp_path / "s.duckdb")
    row = store.runs()[0]
    assert row.status == "failed" and "template exploded" in row.error
    # Items 1-2 were scored and committed; 3 was planned with the failing 4th's batch.
    assert len(every_cell(store)) == 2 * 26 == row.cells_done


def test_the_worker_stops_when_the_run_fails_in_its_model_calls(tiny_folder, tmp_path,
                                                               monkeypatch):
    items = write_items(tmp_path / "items.jsonl", 5)
    original = Run.score_chunk
    calls = {"n": 0}

    def crash_on_second(self, *args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("device fell over")
        return original(self, *args)

    monkeypatch.setattr(Run, "score_chunk", crash_on_second)
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(RuntimeError, match="device fell over"):
        run(tiny_folder, items, tmp_path / "s.duckdb")
    # The first batch, handed to the worker before the crash, is committed all the same.
    assert len(every_cell(Store(tmp_path / "s.duckdb"))) == 2 * 26
    for thread in threading.enumerate():
        if thread.name.startswith("fragility-host") and thread.name not in before:
            thread.join(timeout=10)
            assert not thread.is_alive()
