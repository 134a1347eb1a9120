"""Models kept loaded between the runs of one process (runners/run/held_models.py): a
comparison's chunks load each model once. The whole comparison is checked live in
test_compare_live.py (each model loads once; cells equal a fresh load's)."""

from __future__ import annotations

from types import SimpleNamespace

from runners.run.held_models import HeldModels
from runners.run.loop import Run


class CountingBackend:
    def __init__(self):
        self.loads = []

    def load(self, prepared, spec):
        self.loads.append(prepared.name)
        return (f"model:{prepared.name}", f"scorer:{prepared.name}")


def _prepared(name="m", dtype="fp32", device="cpu"):
    return SimpleNamespace(spec=name, name=name, fingerprint={"weights": name}, device=device,
                           dtype=dtype, quantize=None, prompt_mode="raw", template_args={})


def _spec(max_new_tokens=16):
    return SimpleNamespace(backend="transformers", trust_remote_code=False,
                           max_new_tokens=max_new_tokens, prefix_reuse=True)


def test_the_same_model_and_settings_load_once_and_other_settings_load_again():
    backend, held = CountingBackend(), HeldModels()
    first, reused = held.load(backend, _prepared("a"), _spec())
    assert not reused and first == ("model:a", "scorer:a")
    again, reused = held.load(backend, _prepared("a"), _spec())
    assert reused and again is first
    held.load(backend, _prepared("b"), _spec())
    held.load(backend, _prepared("a", dtype="bf16"), _spec())  # another dtype: other weights
    held.load(backend, _prepared("a"), _spec(max_new_tokens=8))  # another scorer
    assert backend.loads == ["a", "b", "a", "a"] and held.loads == 4 and len(held) == 4


def test_release_drops_every_model_and_the_next_run_loads_again():
    backend, held = CountingBackend(), HeldModels()
    held.load(backend, _prepared("a"), _spec())
    held.release()
    held.release()  # twice is harmless
    assert len(held) == 0
    _, reused = held.load(backend, _prepared("a"), _spec())
    assert not reused and backend.loads == ["a", "a"]


def test_a_run_that_must_wait_for_its_device_lets_the_held_models_go():
    backend, held = CountingBackend(), HeldModels()
    held.load(backend, _prepared("a"), _spec())
    events = []
    run = SimpleNamespace(held=held, run_id="r", events_path=None, slot=None,
                          store=SimpleNamespace(update_run=lambda *a, **k: None),
                          emit=lambda event, **fields: events.append(event))
    Run._queued(run, "cpu", "waiting for cpu (run x holds it)")
    assert len(held) == 0 and events == ["queued"]


def test_a_run_holding_its_device_slot_keeps_its_models_while_it_waits_for_a_writer_lock():
    """A taken-over run (runners/run/handover.py) holds the slot it was handed: no other
    run can use the device, so the weights it was handed for stay."""
    backend, held = CountingBackend(), HeldModels()
    held.load(backend, _prepared("a"), _spec())
    run = SimpleNamespace(held=held, run_id="r", events_path=None,
                          slot=SimpleNamespace(fd=7),
                          store=SimpleNamespace(update_run=lambda *a, **k: None),
                          emit=lambda event, **fields: None)
    Run._queued(run, None, "waiting to write model 'a' into grid 'g', held by run x")
    assert len(held) == 1


def test_keep_one_lets_the_held_model_go_before_another_loads():
    """A plain run holds only its last model (for a queued run of it): loading the next
    model of a run first drops the one before, never two side by side."""
    backend, held = CountingBackend(), HeldModels(keep_one=True)
    held.load(backend, _prepared("a"), _spec())
    held.load(backend, _prepared("b"), _spec())
    assert len(held) == 1 and held.holds(HeldModels.key("transformers", _prepared("b"), _spec()))
    _, reused = held.load(backend, _prepared("b"), _spec())
    assert reused and backend.loads == ["a", "b"]
