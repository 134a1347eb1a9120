"""fragility_tui/slots.py: a slot is a flock'd file; a second taker sees who holds it, a
closed (or dead) holder frees it, the settings say how many, CPU is unlimited by default."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from fragility_tui.errors import InputError
from fragility_tui.slots import (Slot, acquire, slot_count, slot_key, slots_folder,
                                 try_acquire)


def test_one_run_per_gpu_by_default_and_cpu_unlimited(tmp_path):
    env = {}
    first = try_acquire(tmp_path, ["cuda:1"], "run-a pid 1", env)
    assert isinstance(first, Slot) and first.path.name == "cuda1-0.lock"
    assert try_acquire(tmp_path, ["cuda:1"], "run-b pid 2", env) == [("cuda:1", "run-a pid 1")]
    other = try_acquire(tmp_path, ["cuda:0"], "run-b pid 2", env)
    assert isinstance(other, Slot)  # another GPU is another slot
    cpu = [try_acquire(tmp_path, ["cpu"], f"r{k}", env) for k in range(3)]
    assert all(isinstance(s, Slot) and s.fd is None for s in cpu)  # nothing locked
    first.release()
    again = try_acquire(tmp_path, ["cuda:1"], "run-b pid 2", env)
    assert isinstance(again, Slot)
    assert again.path.read_text() == "run-b pid 2\n"
    again.release()
    other.release()


def test_settings_give_more_slots_or_cpu_slots(tmp_path):
    env = {"FRAGILITY_GPU_SLOTS": "2", "FRAGILITY_CPU_SLOTS": "1"}
    a, b = (try_acquire(tmp_path, ["cuda:0"], f"r{k}", env) for k in range(2))
    assert isinstance(a, Slot) and isinstance(b, Slot) and a.path != b.path
    assert len(try_acquire(tmp_path, ["cuda:0"], "r3", env)) == 2
    c = try_acquire(tmp_path, ["cpu"], "c1", env)
    assert isinstance(c, Slot) and c.path.name == "cpu-0.lock"
    assert try_acquire(tmp_path, ["cpu"], "c2", env) == [("cpu", "c1")]
    # any free GPU: the first device with a free slot
    got = try_acquire(tmp_path, ["cuda:0", "cuda:1"], "r4", env)
    assert isinstance(got, Slot) and got.device == "cuda:1"
    for s in (a, b, c, got):
        s.release()
    with pytest.raises(InputError, match="FRAGILITY_GPU_SLOTS must be a whole number"):
        slot_count("cuda:0", {"FRAGILITY_GPU_SLOTS": "one"})
    with pytest.raises(InputError, match="FRAGILITY_CPU_SLOTS"):
        slot_count("cpu", {"FRAGILITY_CPU_SLOTS": "-1"})


def test_visible_devices_map_to_physical_gpus():
    assert slot_key("cuda:0", {"CUDA_VISIBLE_DEVICES": "3,1"}) == "cuda3"
    assert slot_key("cuda:1", {"CUDA_VISIBLE_DEVICES": "3,1"}) == "cuda1"
    assert slot_key("cuda", {}) == "cuda0" and slot_key("cpu", {}) == "cpu"
    assert slots_folder("/x/store.duckdb").as_posix() == "/x/store.duckdb.slots"


def test_a_killed_holder_frees_its_slot(tmp_path):
    code = ("import sys, time; from pathlib import Path; from fragility_tui.slots import "
            "try_acquire; s = try_acquire(Path(sys.argv[1]), ['cuda:0'], 'run-k pid 9', {}); "
            "print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert try_acquire(tmp_path, ["cuda:0"], "me", {}) == [("cuda:0", "run-k pid 9")]
    finally:
        proc.kill()
        proc.wait()
    assert isinstance(try_acquire(tmp_path, ["cuda:0"], "me", {}), Slot)


def test_acquire_waits_says_why_and_can_be_stopped(tmp_path):
    held = try_acquire(tmp_path, ["cuda:1"], "run-a pid 1", {})
    said = []
    threading.Timer(0.3, held.release).start()
    t0 = time.monotonic()
    slot = acquire(tmp_path, ["cuda:1"], "run-b pid 2", wanted="cuda:1", on_wait=said.append,
                   should_stop=lambda: False, poll_s=0.05, environ={})
    assert isinstance(slot, Slot) and time.monotonic() - t0 >= 0.25
    assert said == ["waiting for cuda:1, held by run run-a"]
    stopped = acquire(tmp_path, ["cuda:1"], "run-c", wanted="cuda:1", on_wait=said.append,
                      should_stop=lambda: True, poll_s=0.05, environ={})
    assert stopped is None and said[-1] == "waiting for cuda:1, held by run run-b"
    slot.release()
