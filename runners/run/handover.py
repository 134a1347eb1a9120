"""A queued run taken over by the process that has its model loaded (issue 59, "models stay
loaded").

Runs are separate processes queued by device slots (fragility_tui/slots.py). When a run
ends with its device's slot still held and its model still loaded, a run queued for that
device with the same model and settings (HeldModels.key) would load the same weights again:
minutes for an 8B model. Instead the finishing process (the holder) runs it next, in
process, on the weights it holds, and the queued process follows it.

The hand-over is a claim file, `<store>.slots/claims/<run_id>`, in three steps:
1. the holder creates it (O_EXCL: one holder claims a run), still holding its slot;
2. the queued process, polling while it waits, accepts by renaming it to `<run_id>.taken`
   (an atomic step: a holder that waited too long withdraws by renaming the same file, and
   exactly one of the two renames succeeds), lets go of its writer locks, and writes
   `<run_id>.free`;
3. the holder runs the run under its own run id (a new session in its provenance, the run
   row's pid its own), keeping the slot and the weights; the queued process shows the run's
   events as they come and exits with the run's outcome (a cancel it receives is passed on
   through the run row's `cancelling`).
A queued process that has taken its slot never accepts (it is no longer polling), so a run
is never evaluated twice; the holder then withdraws after WITHDRAW_AFTER_S."""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from pathlib import Path
from fragility_tui.processes import pid_alive, process_start
from fragility_tui.slots import POLL_S
from fragility_tui.store.runs import RunRecord, RunStatus
from fragility_tui.store.schema import utc_now
from fragility_tui.text import clean

WITHDRAW_AFTER_S = 5 * POLL_S  # a waiting run looks every POLL_S
FREE_WAIT_S = 30.0  # how long the holder waits for an accepted run to let go of its locks


def claims_dir(folder: Path) -> Path:
    return folder / "claims"


def _read_mark(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _mark_alive(mark: dict | None) -> bool:
    return bool(mark) and pid_alive(mark.get("pid"), mark.get("pid_started"))


# -- the queued run's side -----------------------------------------------------------------

def accept(folder: Path | None, run_id: str) -> dict | None:
    """The holder's mark ({run_id, pid, pid_started}) when a live holder has claimed this
    run and this call accepted it; None otherwise (no claim, or it was withdrawn)."""
    if folder is None:
        return None
    path = claims_dir(folder) / run_id
    mark = _read_mark(path)
    if mark is None:
        return None
    if not _mark_alive(mark):  # a holder that died after claiming: its claim is nothing
        _unlink(path)
        return None
    try:
        os.rename(path, path.with_name(f"{run_id}.taken"))
    except FileNotFoundError:
        return None  # withdrawn a moment ago
    return mark


def mark_free(folder: Path, run_id: str) -> None:
    """Step 2's end: the accepted run holds no lock the holder needs."""
    claims_dir(folder).mkdir(parents=True, exist_ok=True)
    (claims_dir(folder) / f"{run_id}.free").write_text("", encoding="utf-8")


def follow(run: "Run", holder: dict, stopper) -> str:
    """Show the taken-over run's events as the holder writes them, pass a stop on, and
    return its final status (a failure raises RunFailed with its recorded reason)."""
    from runners.run.failure import RunFailed

    store, run_id = run.store, run.run_id
    run.emit("taken_over", by_run=holder["run_id"], pid=holder["pid"],
             message=f"run {run_id}: taken over by pid {holder['pid']} (run "
                     f"{holder['run_id']}), which has its model loaded; following it")
    offset = _size(run.events_path)
    run.release_slot()  # its writer locks: the holder takes them
    mark_free(run.store.slots_dir(), run_id)
    passed_on = False
    while True:
        offset = _show_new_events(run, offset)
        record = store.get_run(run_id)
        status = record.status if record else None
        if status in (RunStatus.FINISHED, RunStatus.CANCELLED, RunStatus.FAILED):
            _show_new_events(run, offset)
            if status == RunStatus.FAILED:
                # the store's text reaches a terminal: sanitised (fragility_tui.text.clean)
                raise RunFailed(clean(record.error or "failed in the process that took it over",
                                      one_line=True))
            return status
        if stopper.should_stop() and not passed_on and status != RunStatus.CANCELLING:
            store.update_run(run_id, status=RunStatus.CANCELLING)  # the holder polls it
            passed_on = True
        if not _mark_alive(holder):
            raise RunFailed(f"the process that took it over (pid {holder['pid']}) ended "
                            f"without finishing it; `fragility-tui run --resume {run_id}` "
                            "continues it")
        time.sleep(POLL_S)


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def _show_new_events(run: "Run", offset: int) -> int:
    """Show the complete event lines after `offset`; the offset after the last one."""
    try:
        with open(run.events_path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except (OSError, TypeError):
        return offset
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("run_id") == run.run_id:
            try:
                run.display.show(record)
            except Exception:  # a line this version cannot show is not the run's failure
                pass
    return offset + end


# -- the holder's side ---------------------------------------------------------------------

def next_run(run: "Run") -> "Run | None":
    """A queued run this finished run's process should run next on the model it holds,
    claimed and accepted, as a Run holding this one's slot; None when there is none. Never
    raises: a hand-over that cannot happen leaves the queued run to wait as before."""
    folder = run.store.slots_dir()
    if folder is None or run.slot is None or run.slot.fd is None or not run.held:
        return None
    try:
        candidates = _queued_runs(run)
    except Exception:
        return None
    for record in candidates:
        try:
            successor = _take(run, folder, record)
        except Exception:  # not claimed: the queued run waits on as before
            continue
        if successor is not None:
            return successor
    return None


def _queued_runs(run: "Run") -> list[RunRecord]:
    runs = [r for r in run.store.runs() if r.status == RunStatus.QUEUED
            and r.run_id != run.run_id and r.spec and pid_alive(r.pid, r.pid_started)]
    return sorted(runs, key=lambda r: str(r.created_at or ""))  # first come, first taken


def _same_model(run: "Run", spec, prepared) -> bool:
    """Every model of the queued run is held here with the same settings, on this slot's
    device (one the queued run may take a slot of)."""
    from runners.run.device_queue import slot_devices
    from runners.run.held_models import HeldModels

    if spec.backend != run.spec.backend:
        return False
    try:
        _, devices = slot_devices(spec.device, prepared[0].device)
    except Exception:
        return False
    if run.slot.device not in devices:
        return False
    for p in prepared:
        p.device = run.slot.device
    return all(run.held.holds(HeldModels.key(spec.backend, p, spec)) for p in prepared)


def _take(run: "Run", folder: Path, record: RunRecord) -> "Run | None":
    from runners.run.device_queue import load_device

    # the loop's own classes (this module is the loop's helper, not its importer)
    Run, spec = type(run), type(run.spec).from_dict(record.spec)
    try:
        prepared = run.backend.prepare(spec, load_device(spec.device))
    except Exception:
        return None  # it fails the same way in its own process, with its own message
    if not _same_model(run, spec, prepared) or not _claim(run, folder, record):
        return None
    try:  # accepted: the queued process follows whatever this records
        current = run.store.get_run(record.run_id)
        if current is not None and current.status == RunStatus.CANCELLING:
            run.store.update_run(record.run_id, status=RunStatus.CANCELLED)
            return None
        run._say(clean(f"run {run.run_id} done; running queued run {record.run_id} (pid "
                       f"{record.pid}) next, on the model still loaded", one_line=True))
        return Run(spec, run.store, run_id=record.run_id, display=run.display.mode,
                   held=run.held, slot=run.slot, take_queued=True,
                   taken_over_after=run.run_id)
    except Exception as exc:
        _fail(run, record.run_id, exc)
        return None


def _claim(run: "Run", folder: Path, record: RunRecord) -> bool:
    """Claim the queued run and wait until it accepts and lets go of its locks; False (the
    claim withdrawn) when it does not accept in time."""
    path = claims_dir(folder) / record.run_id
    path.parent.mkdir(parents=True, exist_ok=True)
    mark = {"run_id": run.run_id, "pid": os.getpid(), "pid_started": process_start(os.getpid())}
    for attempt in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            if attempt or _mark_alive(_read_mark(path)):
                return False  # another holder claims it
            _unlink(path)  # the claim of a holder that died
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(mark, fh)
    taken = path.with_name(f"{record.run_id}.taken")
    deadline = time.monotonic() + WITHDRAW_AFTER_S
    while not taken.exists():
        if time.monotonic() > deadline or not pid_alive(record.pid, record.pid_started):
            try:
                os.rename(path, path.with_name(f"{record.run_id}.withdrawn"))
            except FileNotFoundError:
                break  # accepted at the last moment
            _unlink(path.with_name(f"{record.run_id}.withdrawn"))
            return False
        time.sleep(POLL_S / 10)
    free = path.with_name(f"{record.run_id}.free")
    deadline = time.monotonic() + FREE_WAIT_S
    while not free.exists() and pid_alive(record.pid, record.pid_started) \
            and time.monotonic() < deadline:
        time.sleep(POLL_S / 10)
    _unlink(taken)
    _unlink(free)
    return True


def _fail(run: "Run", run_id: str, exc: BaseException) -> None:
    from runners.run.failure import failure_reason

    reason = f"taken over by run {run.run_id}, then: {failure_reason(exc)}"
    print(clean(f"error: queued run {run_id}: {reason}", one_line=True), file=sys.stderr,
          flush=True)
    try:
        run.store.update_run(run_id, status=RunStatus.FAILED, error=reason,
                             ended_at=utc_now())
    except Exception:
        pass


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
