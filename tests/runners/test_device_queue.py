"""The queue without a daemon (fragility_tui/slots.py, runners/run/device_queue.py) as a user
meets it: two CLI runs started at once on the CPU with one CPU slot. The second is `queued`
in `runs list` (saying for what and behind whom) until the first ends, then runs to
completion; SIGKILL on the holder lets the waiter start; `--no-wait` refuses with exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from fragility_tui.store.store import Store  # noqa: E402
from test_run_loop import write_items  # noqa: E402
from cli_process import cli_popen, cli_run  # noqa: E402
from helpers import pause_outside_the_store  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def env() -> dict:
    """This process's environment now, plus the queue's settings: read at each call, as a
    copy taken at import would lack what torch set since (TORCHINDUCTOR_CACHE_DIR,
    PYTORCH_CUDA_ALLOC_CONF) and so start every CLI cold instead of forking it warm
    (tests/cli_process.py), ~2.5 CPU-s of imports each."""
    return {**os.environ, "NO_COLOR": "1", "FRAGILITY_CPU_SLOTS": "1"}


def common(tiny_folder, items, db):
    return ["--model", str(tiny_folder), "--items", str(items), "--per-benchmark", "0",
            "--batch-size", "1", "--threads", "1", "--display", "none", "--device", "cpu",
            "--prompt-mode", "chat", "--db", str(db)]


def start(*args):
    return cli_popen(["run", *args], cwd=REPO, env=env(), stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)


def runs_json(db) -> dict:
    out = cli_run(["runs", "list", "--json", "--db", str(db)], cwd=REPO, env=env(),
                  capture_output=True, text=True, timeout=120, check=True)
    return {r["grid"]: r for r in json.loads(out.stdout)}


def runs_read_here(db) -> dict:
    """What `runs list --json` lists, read in this process: the cheap poll while waiting
    (a `runs list` process every 0.2 s took a core from the runs it watched); {} while the
    store cannot be read (a run writing to it)."""
    from fragility_tui.processes import effective_status

    try:
        runs = [r.with_status(effective_status(r)).to_dict() for r in Store(db).runs()]
    except Exception:  # the file being created or locked: look again
        return {}
    return {r["grid"]: json.loads(json.dumps(r, default=str)) for r in runs}


def wait_for(predicate, what: str, procs, timeout=180, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for p in procs:
            if p.poll() not in (None, 0):
                raise AssertionError(f"{what}: a run exited {p.returncode}: {p.stderr.read()}")
        if all(p.poll() is not None for p in procs):
            raise AssertionError(f"{what}: every run ended first")
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


CONFIGS = "o0.letter,o1.letter,cloze_qa"
# One-item batches. The holder is paused (start_two) as soon as its events file shows a
# committed batch, so its items only need to outlast one look at that file (0.02 s): 20
# leave it ~19 batches (~2 s here under load). It was 60, paused only once the other
# run was queued and a `runs list` process had looked too, and each of the two runs then
# evaluated all 60 (~8 s apiece of a test's 22 s). The waiter starts once the holder is
# paused, so its items need outlast nothing: 4.
N_ITEMS = 20
N_WAITER = 4


def first_batch(events: dict) -> str | None:
    """The grid whose run has logged a committed batch (the slot's holder: one slot)."""
    done = [grid for grid, path in events.items()
            if path.exists() and '"event": "batch"' in path.read_text()]
    assert len(done) <= 1, f"two runs on one slot: {done}"
    return done[0] if done else None


def holder_and_waiter(listed: dict):
    """(holder, waiter) once one run is running with cells and the other is queued behind
    it; whichever of two runs started at once takes the slot first is the holder."""
    runs = list(listed.values())
    running = [r for r in runs if r["status"] == "running" and (r["cells_done"] or 0) > 0]
    queued = [r for r in runs if r["status"] == "queued"]
    if len(running) == 1 and len(queued) == 1 and \
            queued[0]["note"] == f"waiting for cpu, held by run {running[0]['run_id']}":
        return running[0], queued[0]
    return None


def start_two(tiny_folder, tmp_path):
    """The two runs, once one holds the slot and the other is queued behind it; the holder
    is returned paused (SIGSTOP, alive, so its slot stays held): the caller sends SIGCONT
    (or SIGKILL). Paused before the checks, a fast machine cannot finish its batches
    while they run. The holder (grid `one`) starts first; the waiter (grid `two`, fewer
    items: only the holder has to outlast a look) once the holder has its slot."""
    items = write_items(tmp_path / "items.jsonl", N_ITEMS)
    db = tmp_path / "s.duckdb"
    Store(db)
    events = {grid: tmp_path / f"{grid}.jsonl" for grid in ("one", "two")}

    def start_run(grid, run_items):
        return start(*common(tiny_folder, run_items, db), "--grid", grid, "--configs",
                     CONFIGS, "--events", str(events[grid]))

    procs = {"one": start_run("one", items)}
    # the holder's first committed batch, read from the events file (a look at the store
    # fails while a run writes to it, and a loaded machine could let a short run end unseen)
    wait_for(lambda: first_batch(events), "the holder's first batch", list(procs.values()),
             every=0.02)
    pause_outside_the_store(procs["one"].pid, db)
    procs["two"] = start_run("two", write_items(tmp_path / "waiter.jsonl", N_WAITER))
    try:  # the other one queued behind it (it may have started later), seen here ...
        wait_for(lambda: holder_and_waiter(runs_read_here(db)), "one running, one queued",
                 list(procs.values()), every=0.1)
        # ... and so `runs list` shows them (normally at the first look)
        holder, waiter = wait_for(lambda: holder_and_waiter(runs_json(db)),
                                  "one running, one queued in `runs list`",
                                  list(procs.values()))
    except BaseException:  # no paused run left behind
        for proc in procs.values():
            proc.kill()
        raise
    return db, items, procs, holder, waiter


@pytest.mark.starts_first
def test_second_run_on_a_busy_device_queues_then_completes(tiny_folder, tmp_path):
    db, items, procs, a, b = start_two(tiny_folder, tmp_path)  # the holder a is paused
    try:
        _check_while_held(db, tiny_folder, items, a, b, procs)
    finally:
        procs[a["grid"]].send_signal(signal.SIGCONT)
    _check_both_finish(db, procs, a, b)


def _check_while_held(db, tiny_folder, items, a, b, procs) -> None:
    assert b["device"] == "cpu" and b["pid"] == procs[b["grid"]].pid
    listing = cli_run(["runs", "list", "--db", str(db)], cwd=REPO, env=env(),
                      capture_output=True, text=True, check=True).stdout
    assert f"waiting for cpu, held by run {a['run_id']}" in listing
    row = next(line for line in listing.splitlines() if line.startswith(b["run_id"]))
    assert row.split()[1:3] == ["queued", "cpu"]
    # --no-wait refuses at once, naming the holder, and leaves no run row
    refused = cli_run(["run", *common(tiny_folder, items, db), "--grid", "third",
                       "--no-wait"], cwd=REPO, env=env(), capture_output=True, text=True,
                      timeout=300)
    assert refused.returncode == 2, refused.stderr
    assert f"cpu is busy, held by run {a['run_id']}; not waiting (--no-wait)" in refused.stderr
    runs = runs_json(db)
    assert "third" not in runs
    # Still queued while the holder holds the slot: the waiter has written nothing.
    assert runs[a["grid"]]["status"] == "running" and runs[b["grid"]]["status"] == "queued"
    assert not runs[b["grid"]]["cells_done"]


def _check_both_finish(db, procs, a, b) -> None:
    if procs[a["grid"]].wait(timeout=300) != 0:  # seen once under make test: say why
        procs[b["grid"]].wait(timeout=300)
        rows = {g: (r["status"], r.get("error")) for g, r in runs_json(db).items()}
        raise AssertionError(f"the holder exited {procs[a['grid']].returncode}: "
                             f"{procs[a['grid']].stderr.read()}; the waiter "
                             f"{procs[b['grid']].returncode}: {procs[b['grid']].stderr.read()}"
                             f"; runs: {rows}")
    assert procs[b["grid"]].wait(timeout=300) == 0, procs[b["grid"]].stderr.read()
    done = runs_json(db)
    assert done[b["grid"]]["status"] == "finished" and done[b["grid"]]["note"] is None
    assert done[b["grid"]]["cells_done"] == done[b["grid"]]["cells_total"] == N_WAITER * 3
    assert done[a["grid"]]["device"] == done[b["grid"]]["device"] == "cpu"
    lines = [json.loads(line) for line in
             Path(done[b["grid"]]["events_path"]).read_text().splitlines()]
    events = [line["event"] for line in lines]
    assert events[0] == "queued" and "started" in events and events[-1] == "finished"
    assert done[b["grid"]]["started_at"] > done[a["grid"]]["ended_at"]
    # Same model, same settings: the holder's process ran the queued run next on the
    # weights it had loaded (runners/run/handover.py), and the queued command followed it.
    assert events[:2] == ["queued", "taken_over"], events
    taken = lines[1]
    assert taken["by_run"] == a["run_id"] and taken["pid"] == procs[a["grid"]].pid
    loaded = [line for line in lines if line["event"] == "model_loaded"]
    assert [line["reused"] for line in loaded] == [True]
    assert done[b["grid"]]["pid"] == procs[a["grid"]].pid
    sessions = done[b["grid"]]["provenance"]["sessions"]
    assert [s.get("taken_over_after_run") for s in sessions] == [a["run_id"]]
    assert sessions[0]["resumed"] is False


def test_killing_the_holder_lets_the_waiter_start(tiny_folder, tmp_path):
    db, _, procs, a, b = start_two(tiny_folder, tmp_path)  # the holder a is paused
    procs[a["grid"]].send_signal(signal.SIGKILL)
    procs[a["grid"]].wait()
    assert procs[b["grid"]].wait(timeout=300) == 0, procs[b["grid"]].stderr.read()
    done = runs_json(db)
    assert done[a["grid"]]["status"] == "died"
    assert done[b["grid"]]["status"] == "finished"
    assert done[b["grid"]]["cells_done"] == N_WAITER * 3
