"""A queued run taken over by the process that has its model loaded (runners/run/handover.py),
piece by piece in one process: the claim file's three steps, which queued runs a holder
takes, and the queued side following the run to its end. Two real CLI processes hand a run
over in tests/runners/test_device_queue.py (the queued command follows it and exits 0)."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

pytest.importorskip("torch")

from fragility_tui.processes import process_start  # noqa: E402
from fragility_tui.slots import try_acquire  # noqa: E402
from fragility_tui.store.runs import RunStatus  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from runners.run import handover  # noqa: E402
from runners.run.failure import RunFailed  # noqa: E402
from runners.run.held_models import HeldModels  # noqa: E402
from runners.run.loop import Run  # noqa: E402
from test_run_loop import spec_for, write_items  # noqa: E402

ME = {"run_id": "holder", "pid": os.getpid(), "pid_started": process_start(os.getpid())}


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "s.duckdb")


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def write_claim(folder, run_id, mark):
    handover.claims_dir(folder).mkdir(parents=True, exist_ok=True)
    (handover.claims_dir(folder) / run_id).write_text(__import__("json").dumps(mark))


def test_a_queued_run_accepts_a_live_holders_claim_once(store):
    folder = store.slots_dir()
    assert handover.accept(folder, "q") is None  # nothing claimed
    write_claim(folder, "q", ME)
    assert handover.accept(folder, "q") == ME
    assert (handover.claims_dir(folder) / "q.taken").exists()
    assert handover.accept(folder, "q") is None  # accepted: no claim left to accept


def test_the_claim_of_a_holder_that_died_is_dropped_not_accepted(store):
    folder = store.slots_dir()
    write_claim(folder, "q", {"run_id": "gone", "pid": dead_pid(), "pid_started": None})
    assert handover.accept(folder, "q") is None
    assert not (handover.claims_dir(folder) / "q").exists()


def queued_row(store, run_id, spec, pid=None):
    pid = pid or os.getpid()
    store.create_run({"run_id": run_id, "grid": spec.grid, "model": "tiny",
                      "status": RunStatus.QUEUED, "spec": spec.to_dict()})
    store.update_run(run_id, status=RunStatus.QUEUED, pid=pid, pid_started=process_start(pid))


def holder_run(tiny_folder, items, store, cpu_slots):
    """A finished run's state as next_run sees it: its slot held, its model held."""
    run = Run(spec_for(tiny_folder, items, grid="one", device="cpu"), store, take_queued=True)
    slot = try_acquire(store.slots_dir(), ["cpu"], "holder", environ=cpu_slots)
    run.slot = slot
    prepared = run.prepared[0]
    run.held._held[HeldModels.key(run.spec.backend, prepared, run.spec)] = ("model", "scorer")
    return run


@pytest.fixture
def cpu_slots(monkeypatch):
    monkeypatch.setenv("FRAGILITY_CPU_SLOTS", "1")
    monkeypatch.setattr(handover, "WITHDRAW_AFTER_S", 0.5)
    return os.environ


def test_a_holder_takes_a_queued_run_of_its_model_and_settings_only(tiny_folder, tmp_path,
                                                                     store, cpu_slots):
    items = write_items(tmp_path / "items.jsonl", 4)
    run = holder_run(tiny_folder, items, store, cpu_slots)
    try:
        other = spec_for(tiny_folder, items, grid="two", device="cpu", max_new_tokens=8)
        queued_row(store, "other-settings", other)
        assert handover.next_run(run) is None  # another scorer: it loads its own
        assert not handover.claims_dir(store.slots_dir()).exists()

        same = spec_for(tiny_folder, items, grid="three", device="cpu")
        queued_row(store, "same", same)
        # nobody accepts (the queued process is not polling): the claim is withdrawn
        assert handover.next_run(run) is None
        assert list(handover.claims_dir(store.slots_dir()).iterdir()) == []

        accepted = []

        def queued_process():  # what a waiting run does between looks at its slot
            while not accepted:
                mark = handover.accept(store.slots_dir(), "same")
                if mark:
                    accepted.append(mark)
                    handover.mark_free(store.slots_dir(), "same")
                time.sleep(0.02)

        waiter = threading.Thread(target=queued_process)
        waiter.start()
        successor = handover.next_run(run)
        waiter.join(timeout=10)
        assert successor is not None and successor.run_id == "same"
        assert accepted[0]["run_id"] == run.run_id and accepted[0]["pid"] == os.getpid()
        assert successor.slot is run.slot and successor.held is run.held
        assert successor.session["taken_over_after_run"] == run.run_id
        assert not successor.session["resumed"]
        assert list(handover.claims_dir(store.slots_dir()).iterdir()) == []
    finally:
        run.slot.release()


def test_a_holder_without_a_device_slot_hands_nothing_over(tiny_folder, tmp_path, store):
    """No slot limit on the device: nothing is queued for it, so nothing is taken."""
    items = write_items(tmp_path / "items.jsonl", 4)
    run = Run(spec_for(tiny_folder, items, grid="one", device="cpu"), store, take_queued=True)
    queued_row(store, "same", spec_for(tiny_folder, items, grid="two", device="cpu"))
    assert handover.next_run(run) is None


class Following:
    """What follow() needs of the queued Run."""

    def __init__(self, store, tmp_path, run_id="q"):
        from runners.run.events import Display

        self.store, self.run_id = store, run_id
        self.events_path = str(tmp_path / "q.jsonl")
        self.display = Display("none")
        self.emitted = []
        self.released = False

    def emit(self, event, **fields):
        self.emitted.append(event)

    def release_slot(self):
        self.released = True


class Stop:
    def __init__(self, requested=False):
        self.requested = requested

    def should_stop(self):
        return self.requested


def later(seconds, action):
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def test_the_queued_side_follows_to_the_holders_outcome(store, tmp_path, monkeypatch):
    monkeypatch.setattr(handover, "POLL_S", 0.05)
    spec = spec_for("m", "i", grid="g")
    queued_row(store, "q", spec)
    run = Following(store, tmp_path)
    later(0.2, lambda: store.update_run("q", status=RunStatus.FINISHED))
    assert handover.follow(run, ME, Stop()) == RunStatus.FINISHED
    assert run.emitted == ["taken_over"] and run.released
    assert (handover.claims_dir(store.slots_dir()) / "q.free").exists()

    store.update_run("q", status=RunStatus.RUNNING)
    later(0.2, lambda: store.update_run("q", status=RunStatus.FAILED, error="disk full: x"))
    with pytest.raises(RunFailed, match="disk full: x"):
        handover.follow(Following(store, tmp_path), ME, Stop())


def test_a_stop_on_the_queued_side_is_passed_on_through_the_run_row(store, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setattr(handover, "POLL_S", 0.05)
    queued_row(store, "q", spec_for("m", "i", grid="g"))
    store.update_run("q", status=RunStatus.RUNNING)
    seen = []

    def holder_sees_the_cancel():
        while store.get_run("q").status != RunStatus.CANCELLING:
            time.sleep(0.02)
        seen.append(True)
        store.update_run("q", status=RunStatus.CANCELLED)

    threading.Thread(target=holder_sees_the_cancel, daemon=True).start()
    assert handover.follow(Following(store, tmp_path), ME, Stop(True)) == RunStatus.CANCELLED
    assert seen


def test_a_holder_that_dies_mid_run_is_a_failure_that_says_how_to_resume(store, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(handover, "POLL_S", 0.05)
    queued_row(store, "q", spec_for("m", "i", grid="g"))
    store.update_run("q", status=RunStatus.RUNNING)
    gone = {"run_id": "holder", "pid": dead_pid(), "pid_started": None}
    with pytest.raises(RunFailed, match="--resume q"):
        handover.follow(Following(store, tmp_path), gone, Stop())


def test_a_taken_run_that_cannot_start_is_recorded_failed_for_its_follower(
        tiny_folder, tmp_path, store, cpu_slots):
    """Accepted, then its items are gone: the holder records why, so the queued command
    following it exits 1 with that reason instead of waiting on a run nobody runs."""
    items = write_items(tmp_path / "items.jsonl", 4)
    run = holder_run(tiny_folder, items, store, cpu_slots)
    try:
        gone = write_items(tmp_path / "gone.jsonl", 4)
        queued_row(store, "doomed", spec_for(tiny_folder, gone, grid="two", device="cpu"))
        gone.unlink()

        def queued_process():
            for _ in range(500):
                if handover.accept(store.slots_dir(), "doomed"):
                    handover.mark_free(store.slots_dir(), "doomed")
                    return
                time.sleep(0.02)

        waiter = threading.Thread(target=queued_process)
        waiter.start()
        assert handover.next_run(run) is None
        waiter.join(timeout=10)
        record = store.get_run("doomed")
        assert record.status == RunStatus.FAILED and record.ended_at is not None
        assert record.error.startswith(f"taken over by run {run.run_id}, then: ")
        assert "gone.jsonl" in record.error
    finally:
        run.slot.release()
