"""The memo of the plain loop's model calls (reference_memo.py, what `make test`'s SmolLM2
reference check reads): a call is served only for the exact inputs and model identity it
was recorded under, and the cells built from served calls equal the live ones."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from reference_memo import MemoCalls  # noqa: E402
from test_scoring import CONFIG_IDS, ITEMS, SEED  # noqa: E402

from runners.backends.transformers.plain_loop import reference_cells  # noqa: E402

IDENTITY = {"weights_sha256": "a" * 64, "torch": "2.13.0+cpu", "model_calls_sha256": "b"}


def cells(model, tokenizer, item, calls):
    with torch.inference_mode():
        got = reference_cells(model, tokenizer, item, CONFIG_IDS, SEED, chat=True, calls=calls)
    return {config: dataclasses.astuple(cell) for config, cell in got.items()}


def test_served_calls_give_the_live_cells_and_only_for_their_inputs(tiny_model, tiny_tokenizer,
                                                                   tmp_path):
    path = tmp_path / "memo.json"
    recording = MemoCalls(IDENTITY, path, use=False)
    live = cells(tiny_model, tiny_tokenizer, ITEMS[0], recording)
    assert recording.served == 0 and recording.computed > 0
    recording.save()

    memo = MemoCalls(IDENTITY, path)
    assert cells(tiny_model, tiny_tokenizer, ITEMS[0], memo) == live
    assert (memo.served, memo.computed) == (recording.computed, 0)
    # another item: other token ids, nothing to serve
    memo = MemoCalls(IDENTITY, path)
    cells(tiny_model, tiny_tokenizer, ITEMS[1], memo)
    assert memo.served == 0 and memo.computed == recording.computed


def test_a_memo_recorded_under_another_identity_serves_nothing_and_says_why(
        tiny_model, tiny_tokenizer, tmp_path):
    path = tmp_path / "memo.json"
    recording = MemoCalls(IDENTITY, path, use=False)
    live = cells(tiny_model, tiny_tokenizer, ITEMS[0], recording)
    recording.save()
    newer = MemoCalls({**IDENTITY, "torch": "2.14.0+cpu"}, path)
    assert cells(tiny_model, tiny_tokenizer, ITEMS[0], newer) == live
    assert newer.served == 0 and newer.stale
    assert "['torch']" in newer.summary()


def test_a_served_output_is_what_the_cells_are_built_from(tiny_model, tiny_tokenizer, tmp_path):
    """The memo really stands in for the model: a recorded answer edited in the file is the
    answer the reference cell then gives (so the check compares the runner with it)."""
    import json

    path = tmp_path / "memo.json"
    recording = MemoCalls(IDENTITY, path, use=False)
    cells(tiny_model, tiny_tokenizer, ITEMS[0], recording)
    recording.save()
    stored = json.loads(path.read_text())
    for key, value in stored["entries"].items():
        if isinstance(value, float):  # a log-likelihood: make it far the best
            stored["entries"][key] = 1e6
    path.write_text(json.dumps(stored))
    served = cells(tiny_model, tiny_tokenizer, ITEMS[0], MemoCalls(IDENTITY, path))
    cloze = [config for config in CONFIG_IDS if config.startswith("cloze")]
    assert cloze and all(served[config][2] == [1e6] * len(served[config][2])
                         for config in cloze)
