"""Device slots: a queue of runs without a daemon.

A run holds one slot of its device from before it loads the model until it ends. A slot is
a lock file beside the store, `<store>.slots/<device>-<k>.lock` (`cuda1-0.lock`,
`cpu-0.lock`), taken with `fcntl.flock`: the kernel drops the lock when its holder's
process ends however it ends (kill -9 included), so a dead holder never keeps a slot, and
no process has to stay up to hand slots out — the waiting runs themselves poll.

How many runs a device takes at once is a setting (fragility_tui/settings.py, documented in
docs/architecture.md's settings table): FRAGILITY_GPU_SLOTS runs per GPU (default 1; 0 = no limit),
FRAGILITY_CPU_SLOTS runs on the CPU (default 0 = no limit: CPU runs are not queued unless
this is set). Waiters poll (every second); whichever polls first after a slot frees takes
it, so the queue is not first-come-first-served.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from fragility_tui import settings
from fragility_tui.errors import InputError

POLL_S = 1.0


def slot_count(device: str, environ=None) -> int:
    """Runs the device takes at once (0 = no limit): fragility_tui.settings.device_slots."""
    try:
        return settings.device_slots(device, environ)
    except ValueError as exc:  # a bad setting is bad input (exit 2), named by the message
        raise InputError(str(exc)) from None


def slot_key(device: str, environ=os.environ) -> str:
    """The lock-file name of a device: `cpu`, or `cuda<N>` with N the physical GPU index, so
    that a run under CUDA_VISIBLE_DEVICES=1 (its cuda:0) and a run on cuda:1 share a slot."""
    if device == "cpu":
        return "cpu"
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    visible = [v.strip() for v in environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if v.strip()]
    if visible and index < len(visible):
        physical = visible[index]
        # A GPU named by UUID keeps its name: two runs naming it the same way still meet.
        return f"cuda{physical}" if physical.isdigit() else f"cuda-{physical}"
    return f"cuda{index}"


@dataclass
class Slot:
    """A slot held by this process (`fd` None: a device without a limit, nothing held)."""

    device: str
    path: Path | None = None
    fd: int | None = None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor drops the flock
            self.fd = None


def _try_slot(path: Path, device: str, holder: str) -> Slot | str:
    """The slot at `path` if free (then marked with `holder`), else who holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # no O_TRUNC: the holder's mark stays
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise
        try:
            held_by = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            held_by = ""
        return held_by or "another run"
    os.ftruncate(fd, 0)
    os.pwrite(fd, (holder + "\n").encode(), 0)
    return Slot(device, path, fd)


def try_acquire(folder: Path, devices: Sequence[str], holder: str,
                environ=os.environ) -> Slot | list[tuple[str, str]]:
    """A slot of the first of `devices` that has one free, or (device, holder) for every
    slot held. A device without a limit is always free (nothing is locked)."""
    held = []
    for device in devices:
        count = slot_count(device, environ)
        if count == 0:
            return Slot(device)
        folder.mkdir(parents=True, exist_ok=True)
        key = slot_key(device, environ)
        for k in range(count):
            got = _try_slot(folder / f"{key}-{k}.lock", device, holder)
            if isinstance(got, Slot):
                return got
            held.append((device, got))
    return held


def held_by(held: list[tuple[str, str]]) -> str:
    """`held by run R` (several slots or GPUs: `held by runs R, S`)."""
    runs = sorted({h.split()[0] if h != "another run" else h for _, h in held})
    return f"held by run{'s' if len(runs) > 1 else ''} {', '.join(runs)}"


def waiting_message(wanted: str, held: list[tuple[str, str]]) -> str:
    """`waiting for cuda:1, held by run R`."""
    return f"waiting for {wanted}, {held_by(held)}"


def acquire(folder: Path, devices: Sequence[str], holder: str, *, wanted: str,
            on_wait: Callable[[str], None], should_stop: Callable[[], bool],
            poll_s: float = POLL_S, environ=os.environ) -> Slot | None:
    """Wait for a slot of one of `devices`; `on_wait(message)` whenever what it waits for
    changes; None when `should_stop()` says to give up."""
    said = None
    while True:
        got = try_acquire(folder, devices, holder, environ)
        if isinstance(got, Slot):
            return got
        message = waiting_message(wanted, got)
        if message != said:
            on_wait(message)
            said = message
        if should_stop():
            return None
        time.sleep(poll_s)


def slots_folder(store_path: str | os.PathLike) -> Path:
    """`<store>.slots`, beside the store file."""
    path = Path(store_path)
    return path.with_name(path.name + ".slots")


def writer_path(folder: Path, grid: str, model: str) -> Path:
    """The lock of one model's cells in one grid: `<store>.slots/writers/<hash>.lock` (the
    names hashed, so any grid or model name makes a safe file name)."""
    import hashlib

    digest = hashlib.sha256(f"{grid}\0{model}".encode()).hexdigest()[:24]
    return folder / "writers" / f"{digest}.lock"


def try_writer(folder: Path, grid: str, model: str, holder: str) -> Slot | str:
    """Hold the right to write `model`'s cells into `grid` (a flock, dropped when the
    holder's process ends however it ends), or say who holds it: two runs of one model
    into one grid would otherwise each compute every cell."""
    path = writer_path(folder, grid, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    return _try_slot(path, f"writer of {model}", holder)
