"""Prefill's call sizing is per device (issue 46): the CPU's constants (a call's fixed cost
of 64 padded tokens, 128 head rows at a time) were used on CUDA too, where a call's fixed
cost (kernel launches, a full read of the weights) is worth far more tokens."""

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
