"""A memo of the plain loop's model calls for the SmolLM2 reference check (test_smollm2.py).

The plain loop (runners/backends/transformers/plain_loop.py) is the check's yardstick and
its slowest part: ~85 of the test's ~115 CPU-seconds in `make test`, recomputing the same
model outputs on every run. Its model is called in exactly two ways (ModelCalls: greedy
generation over given token ids, a continuation's log-likelihood over given token ids);
rendering, tokenising, parsing and normalising happen around those calls. This memo stands
in for the two calls:

- a call is served from the memo only when its exact inputs (every token id, the padding
  id, the generation length, the start of the continuation) were recorded, under the same
  model identity: the weights' and tokenizer's sha256, dtype, device, attention kernel,
  torch and transformers versions, and the source of ModelCalls itself. Anything else is
  computed live, as before, and the test says how many calls were;
- the runner's cells are still compared with the reference cells built from those
  outputs, so a runner that changes an answer fails as it did;
- the memo is written only on request: `make test-reference-memo` (all live, then saved);
  `make test-reference` (the 40-item acceptance check) runs with the memo off.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

from runners.backends.transformers.plain_loop import ModelCalls

MEMO = Path(__file__).parent / "data" / "smollm2_reference_memo.json"


def model_identity(loaded) -> dict:
    """What the model's outputs depend on, besides the token ids."""
    provenance = loaded.provenance or {}
    libraries = provenance.get("libraries") or {}
    return {"weights_sha256": provenance.get("weights_sha256"),
            "tokenizer_sha256": provenance.get("tokenizer_sha256"),
            "dtype": provenance.get("dtype"), "device": str(loaded.model.device),
            "attn_implementation": provenance.get("attn_implementation"),
            "torch": libraries.get("torch"), "transformers": libraries.get("transformers"),
            "model_calls_sha256": hashlib.sha256(
                inspect.getsource(ModelCalls).encode()).hexdigest()}


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()


class MemoCalls(ModelCalls):
    """ModelCalls served from `entries` where the identity and the inputs match, computed
    live (and remembered, for save()) otherwise."""

    def __init__(self, identity: dict, path: Path = MEMO, *, use: bool = True):
        self.identity, self.path = identity, path
        stored = json.loads(path.read_text()) if use and path.is_file() else {}
        self.stale = bool(stored) and stored.get("identity") != identity
        self.entries = {} if self.stale else dict(stored.get("entries", {}))
        self.served = self.computed = 0
        self.recorded: dict = {}

    def greedy(self, model, rows, pad, max_new_tokens):
        key = _key("greedy", rows, pad, max_new_tokens)
        if key in self.entries:
            self.served += 1
            return [(list(new), list(gaps)) for new, gaps in self.entries[key]]
        self.computed += 1
        got = super().greedy(model, rows, pad, max_new_tokens)
        self.recorded[key] = got
        return got

    def loglikelihood(self, model, fed, start):
        key = _key("loglikelihood", fed, start)
        if key in self.entries:
            self.served += 1
            return self.entries[key]
        self.computed += 1
        got = super().loglikelihood(model, fed, start)
        self.recorded[key] = got
        return got

    def summary(self) -> str:
        why = ""
        if self.stale:
            recorded = json.loads(self.path.read_text()).get("identity", {})
            changed = sorted(k for k in self.identity if recorded.get(k) != self.identity[k])
            why = f" (recorded under another model identity: {changed})"
        return (f"reference memo: {self.served} model calls served, {self.computed} computed "
                f"live{why}")

    def save(self) -> None:
        """The calls made in this run, whole (a run with the memo off records them all)."""
        entries = {key: value for key, value in sorted(self.recorded.items())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"identity": self.identity, "entries": entries},
                                        indent=0, sort_keys=True) + "\n")
