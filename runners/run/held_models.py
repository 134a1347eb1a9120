"""Models a process keeps loaded from one run to the next (issue 59, "models stay loaded").

`compare A B --items` evaluates its pool in chunks, each chunk an ordinary run per model;
loading both models again for every 25 items spent more time loading than scoring (1.4 to
40.7 s per chunk's run on the CPU, minutes for an 8B model). A comparison holds one
HeldModels for its whole length: each model loads once, and a later chunk's run of the same
model with the same settings takes the loaded weights and scorer as they are.

The models are held only while the process has the device to itself: a run that must wait
for its device (another process's run holds it) releases them first, so that no idle
weights sit in the memory the other run measures for its batches; they load again when the
wait ends.

A plain `run` holds its last model too (`keep_one`: loading another model lets the one held
go first, so a run of several models never holds two): a run queued behind it for the same
model and settings is then run by its process on those weights (runners/run/handover.py)."""

from __future__ import annotations

import gc
import json


class HeldModels:
    def __init__(self, keep_one: bool = False) -> None:
        self._held: dict[str, tuple] = {}
        self.keep_one = keep_one
        self.loads = 0  # how many times a model was actually loaded (tests, the CLI's note)

    @staticmethod
    def key(backend_name: str, prepared, spec) -> str:
        """Everything that makes a loaded model and its scorer what they are."""
        return json.dumps({
            "backend": backend_name, "spec": prepared.spec, "name": prepared.name,
            "fingerprint": prepared.fingerprint, "device": prepared.device,
            "dtype": prepared.dtype, "quantize": prepared.quantize,
            "prompt_mode": prepared.prompt_mode, "template_args": prepared.template_args,
            "trust_remote_code": spec.trust_remote_code,
            "max_new_tokens": spec.max_new_tokens, "prefix_reuse": spec.prefix_reuse,
        }, sort_keys=True, default=str)

    def load(self, backend, prepared, spec) -> tuple[tuple, bool]:
        """((loaded, scorer), reused): the held pair for these settings, else a fresh load
        that is then held."""
        key = self.key(spec.backend, prepared, spec)
        if key in self._held:
            return self._held[key], True
        if self.keep_one:
            self.release()  # before the next model loads, not beside it
        pair = backend.load(prepared, spec)
        self.loads += 1
        self._held[key] = pair
        return pair, False

    def holds(self, key: str) -> bool:
        return key in self._held

    def release(self) -> None:
        """Drop every held model and give its memory back (a GPU's cache included)."""
        if not self._held:
            return
        self._held.clear()
        gc.collect()
        import sys

        torch = sys.modules.get("torch")  # only a process that loaded a model has it
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def __len__(self) -> int:
        return len(self._held)
