"""A run's device slot (fragility_tui/slots.py) as the run loop takes it: which devices a
`--device` may take a slot of, taking one at once (`--no-wait`) or waiting as `queued`."""

from __future__ import annotations

import os
import time
from typing import Callable

from fragility_tui.devices import ANY_GPU
from fragility_tui.errors import InputError
from fragility_tui.slots import POLL_S, Slot, acquire, held_by, try_acquire, try_writer
from fragility_tui.store.sink import CellSink


def load_device(device: str) -> str:
    """What prepare_model resolves for a recorded --device: `any` is a CUDA device (which
    one is known once a slot is free)."""
    return "cuda" if device == ANY_GPU else device


def slot_devices(requested: str, resolved: str) -> tuple[str, list[str]]:
    """(what the run waits for, in words; the devices whose slots it may take).
    `resolved` is the device prepare_model picked (cpu, cuda or cuda:N)."""
    if requested == ANY_GPU:
        import torch

        count = torch.cuda.device_count()
        if count == 0:
            raise InputError("--device any asks for a free GPU, but no CUDA device is "
                             "available", field="--device")
        return "any free GPU", [f"cuda:{k}" for k in range(count)]
    device = "cuda:0" if resolved == "cuda" else resolved
    return device, [device]


def holder_mark(run_id: str) -> str:
    return f"{run_id} pid {os.getpid()}"


def take_now(store: CellSink, run_id: str, requested: str, resolved: str) -> Slot:
    """A slot at once, or InputError (exit 2) naming who holds the device (`--no-wait`)."""
    wanted, devices = slot_devices(requested, resolved)
    folder = store.slots_dir()
    if folder is None:
        return Slot(devices[0])
    got = try_acquire(folder, devices, holder_mark(run_id))
    if isinstance(got, Slot):
        return got
    raise InputError(f"{wanted} is busy, {held_by(got)}; not waiting (--no-wait)",
                     field="--no-wait")


def wait_for(store: CellSink, run_id: str, requested: str, resolved: str, *,
             on_wait: Callable[[str, str], None],
             should_stop: Callable[[], bool]) -> Slot | None:
    """A slot, waiting while the device is busy (`on_wait(device, message)` each time what
    it waits for changes); None when the run was stopped while it waited."""
    wanted, devices = slot_devices(requested, resolved)
    folder = store.slots_dir()
    if folder is None:
        return Slot(devices[0])
    return acquire(folder, devices, holder_mark(run_id), wanted=wanted,
                   on_wait=lambda message: on_wait(devices[0] if len(devices) == 1
                                                    else ANY_GPU, message),
                   should_stop=should_stop)


def wait_for_writers(store: CellSink, run_id: str, grid: str, models: list[str], *,
                     on_wait: Callable[[str], None], should_stop: Callable[[], bool],
                     wait: bool = True) -> list[Slot] | None:
    """The writer locks of the run's models in the grid (in name order, so two runs never
    hold one each and wait for the other's), waiting while another run holds one; None
    when stopped while waiting; with wait=False (`--no-wait`) a held one is an InputError.
    No queue (a parts folder): nothing to hold."""
    folder = store.slots_dir()
    if folder is None:
        return []
    held: list[Slot] = []
    said = None
    for model in sorted(set(models)):
        while True:
            got = try_writer(folder, grid, model, holder_mark(run_id))
            if not isinstance(got, str):
                held.append(got)
                break
            message = (f"waiting to write model {model!r} into grid {grid!r}, "
                       f"{held_by([(model, got)])}")
            if not wait:
                for slot in held:
                    slot.release()
                raise InputError(f"model {model!r} is being written into grid {grid!r}, "
                                 f"{held_by([(model, got)])}; not waiting (--no-wait)",
                                 field="--no-wait")
            if message != said:
                on_wait(message)
                said = message
            if should_stop():
                for slot in held:
                    slot.release()
                return None
            time.sleep(POLL_S)
    return held
