"""The transformers scorer's device paths (issue 46), shown on the CPU: prefill's call sizing
is per device (the CPU's constants, a call's fixed cost of 64 padded tokens and 128 head
rows at a time, were used on CUDA too, where a call's fixed cost is worth far more tokens);
host tensors reach a GPU through pinned memory without blocking, and a decoding step reads
its results back once."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runners.backends.transformers import prefill  # noqa: E402
from runners.backends.transformers.memory import head_call_bytes  # noqa: E402


def _fragments(sizes):
    empty = prefill.NodeState(torch.zeros(0, dtype=torch.long), None, [])
    return [prefill.Fragment(empty, [], size, []) for size in sizes]


def test_each_device_type_has_its_own_constants():
    cpu, cuda = prefill.constants_for("cpu"), prefill.constants_for("cuda:1")
    assert cpu == prefill.constants_for(torch.device("cpu")) == prefill.PrefillConstants(64, 128)
    assert cuda == prefill.constants_for(torch.device("cuda", 0))
    assert cuda.forward_overhead_tokens > cpu.forward_overhead_tokens
    assert cuda.chunk_rows > cpu.chunk_rows
    assert prefill.constants_for("mps") == cpu  # no constants of its own: the CPU's


def test_a_gpu_call_takes_rows_a_cpu_call_leaves_to_the_next():
    """Rows of 256, 220 and 200 tokens: on a CPU, padding the shorter rows to 256 costs
    more than a call, so they go in calls of their own; on CUDA one call takes them all."""
    sizes = [256] * 4 + [220] * 4 + [200] * 4
    on_cpu = prefill.forward_groups(_fragments(sizes), 1 << 16,
                                    prefill.constants_for("cpu").forward_overhead_tokens)
    on_gpu = prefill.forward_groups(_fragments(sizes), 1 << 16,
                                    prefill.constants_for("cuda").forward_overhead_tokens)
    assert len(on_cpu) > 1 and len(on_gpu) == 1


def test_the_scorer_and_the_budget_use_the_devices_constants(tiny_model, tiny_tokenizer):
    from transformers import LlamaConfig

    from runners.backends.transformers.scoring import Scorer

    scorer = Scorer(tiny_model, tiny_tokenizer, {tiny_tokenizer.eos_token_id})
    assert scorer.prefill_constants == prefill.constants_for("cpu")
    config = LlamaConfig(vocab_size=1000)
    assert head_call_bytes(config) == head_call_bytes(config, "cpu") == 2 * 1000 * 128 * 4
    assert head_call_bytes(config, "cuda:0") == 2 * 1000 * 1024 * 4


def test_a_decoding_step_reads_back_once(tiny_model, tiny_tokenizer, monkeypatch):
    """Each greedy step's chosen tokens and top-2 gaps come back to the host in one
    transfer (on CUDA, one synchronisation a step: it read them back in two)."""
    from runners.backends.transformers import scoring
    from runners.backends.transformers.scoring import GenRequest, Scorer

    scorer = Scorer(tiny_model, tiny_tokenizer, {tiny_tokenizer.eos_token_id},
                    max_new_tokens=6)
    judging, reads, calls = [False], [0], [0]
    original_judge = scoring.Scorer._judge

    def judge(self, *args, **kwargs):
        judging[0] = True
        calls[0] += 1
        try:
            return original_judge(self, *args, **kwargs)
        finally:
            judging[0] = False

    def counted(name):
        original = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            reads[0] += judging[0]
            return original(self, *args, **kwargs)
        return read

    monkeypatch.setattr(scoring.Scorer, "_judge", judge)
    for name in ("tolist", "item", "cpu"):
        monkeypatch.setattr(torch.Tensor, name, counted(name))
    prompts = [tiny_tokenizer(text)["input_ids"] for text in
               ("Question: Which gas? Answer:", "The capital of France is", "A. oxygen B.")]
    requests = [GenRequest(i, ids, lambda text: False) for i, ids in enumerate(prompts)]
    result = scorer.score(requests, [])
    assert len(result.generations) == 3 and calls[0] >= 6
    assert reads[0] == calls[0]


def test_host_tensors_go_to_a_gpu_through_pinned_memory_without_blocking(monkeypatch):
    from runners.backends.transformers.model_calls import to_device

    sent = []

    class Pinned:
        def to(self, device, non_blocking=False):
            sent.append((str(device), non_blocking))
            return "on the gpu"

    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: Pinned())
    assert to_device(torch.zeros(3), torch.device("cuda", 0)) == "on the gpu"
    assert sent == [("cuda:0", True)]
    host = torch.zeros(3)
    assert to_device(host, torch.device("cpu")) is host and len(sent) == 1


def test_a_decoding_step_picks_its_features_by_index_not_by_mask(tiny_model, tiny_tokenizer,
                                                                  monkeypatch):
    """Indexing with a boolean mask makes the host wait for the device (the result's size
    depends on the mask's contents); the step's real queries are picked by an index built on
    the device instead, so a step has one synchronisation: its read-back."""
    from runners.backends.transformers import decoding
    from runners.backends.transformers.scoring import GenRequest, Scorer

    scorer = Scorer(tiny_model, tiny_tokenizer, {tiny_tokenizer.eos_token_id},
                    max_new_tokens=4)
    stepping, masked = [False], [0]
    original_step = decoding.DecodingRows.step
    original_getitem = torch.Tensor.__getitem__

    def step(self, *args, **kwargs):
        stepping[0] = True
        try:
            return original_step(self, *args, **kwargs)
        finally:
            stepping[0] = False

    def getitem(self, index):
        if stepping[0] and isinstance(index, torch.Tensor) and index.dtype == torch.bool:
            masked[0] += 1
        return original_getitem(self, index)

    monkeypatch.setattr(decoding.DecodingRows, "step", step)
    monkeypatch.setattr(torch.Tensor, "__getitem__", getitem)
    prompts = [tiny_tokenizer(text)["input_ids"] for text in
               ("Question: Which gas? Answer:", "The capital of France is")]
    result = scorer.score([GenRequest(i, ids, lambda text: False)
                           for i, ids in enumerate(prompts)], [])
    assert len(result.generations) == 2 and result.stats.decode_calls >= 2
    assert masked[0] == 0
