"""Batch sizing: the token budget, its out-of-memory halving and growing back, and how the
starting budget follows the memory a token costs."""

from __future__ import annotations

import pytest

from runners.backends.base import configure_allocator
from runners.backends.transformers.memory import call_bytes_per_token, initial_budget
from runners.plan.budget import MIN_TOKENS, RAMP_STEPS, TokenBudget, attempt


def test_a_batch_takes_items_until_the_budget_is_reached():
    budget = TokenBudget(1000, "test")
    assert budget.fits(0, 5000)  # the first item always goes, however big
    assert budget.fits(3, 999) and not budget.fits(3, 1000)
    capped = TokenBudget(1000, "test", item_cap=2)
    assert capped.fits(1, 10) and not capped.fits(2, 10)


def test_out_of_memory_halves_tokens_and_items_then_grows_back_short_of_what_failed():
    budget = TokenBudget(4096, "test")
    assert budget.shrink(batch_items=8)
    assert (budget.tokens, budget.item_limit) == (2048, 4)
    assert budget.shrink(batch_items=4)
    assert (budget.tokens, budget.item_limit) == (1024, 2)
    assert budget.failed == 2048  # the smallest budget that failed
    budget.succeeded(2)
    assert budget.tokens == 1024  # one good batch is not yet a trend
    budget.succeeded(2)
    # never back to 2048, which failed: 3/4 of it is as high as it goes, so no item limit
    assert (budget.tokens, budget.item_limit) == (1536, None)
    for _ in range(6):
        budget.succeeded(4)
    assert budget.tokens == 1536
    record = budget.record()
    assert record["oom_retries"] == 2 and record["batches"] == 8
    assert record["failed_budget"] == 2048
    assert record["budgets_used"] == {"1024": 2, "1536": 6}
    assert record["items_per_batch"] == {"min": 2, "max": 4, "mean": 3.5}


def test_without_out_of_memory_the_budget_grows_back_to_its_ceiling():
    budget = TokenBudget(4096, "test", tokens=1024)
    for _ in range(4):
        budget.succeeded(1)
    assert budget.tokens == 4096 and budget.failed is None


def test_a_users_item_cap_is_restored_not_lifted():
    budget = TokenBudget(4096, "test", item_cap=3)
    budget.shrink(batch_items=3)
    assert budget.item_limit == 1
    for _ in range(4):
        budget.succeeded(1)
    assert (budget.tokens, budget.item_limit) == (3072, 3)  # 3/4 of the budget that failed


def test_the_first_batches_ramp_up_to_the_budget_so_the_device_starts_early():
    budget = TokenBudget(4096, "test", ramp=3)
    sizes = []
    for _ in range(5):
        sizes.append(budget.batch_tokens())
        assert budget.fits(1, sizes[-1] - 1) and not budget.fits(1, sizes[-1])
        ahead = budget.foreseen(4)  # what the worker plans the next batch with
        budget.succeeded(4)
        assert ahead.batch_tokens() == budget.batch_tokens()
    assert sizes == [512, 1024, 2048, 4096, 4096]
    assert budget.tokens == 4096 and budget.streak == 2  # the ramp is not growth
    assert budget.record()["budgets_used"] == {"512": 1, "1024": 1, "2048": 1, "4096": 2}
    assert TokenBudget(MIN_TOKENS, "test", ramp=3).batch_tokens() == MIN_TOKENS  # the floor


def test_out_of_memory_during_the_ramp_halves_the_whole_budget_and_ends_the_ramp():
    budget = TokenBudget(4096, "test", ramp=3)
    assert budget.shrink(batch_items=2)  # the calls' bound (the whole budget) failed
    assert (budget.tokens, budget.batch_tokens(), budget.ramp) == (2048, 2048, 0)


def test_gpu_budgets_ramp_up_and_cpu_and_served_ones_do_not(monkeypatch):
    """On a CPU the forwards take ~100x longer than planning: extra batches (each with its
    decoding tail) would cost more than the wait they save."""
    import torch

    from runners.plan.budget import SchedulesOwnMemory
    from runners.backends.vllm import VLLMScorer

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (40 << 30, 80 << 30))
    assert initial_budget(131072, "cuda:0", None, 2).ramp == RAMP_STEPS
    assert initial_budget(131072, "cuda:1", None, 2, tokens=4096).ramp == RAMP_STEPS
    assert initial_budget(46080, "cpu").ramp == 0
    assert initial_budget(46080, "cpu", tokens=4096).ramp == 0

    class Server(SchedulesOwnMemory):  # a served model plans in line: nothing to overlap
        budget_default, budget_source = 8192, "test"

    assert Server().token_budget(None, None).ramp == 0
    assert VLLMScorer.token_budget(VLLMScorer, 4096, None).ramp == RAMP_STEPS


def test_nothing_left_to_try_when_one_item_fails_at_the_smallest_budget():
    budget = TokenBudget(MIN_TOKENS * 2, "test")
    assert budget.shrink(batch_items=1)  # the budget can still halve
    assert budget.tokens == MIN_TOKENS
    assert not budget.shrink(batch_items=1)


def test_the_cpu_budget_is_a_gigabyte_over_pool_plus_gathered_copy_per_token(monkeypatch):
    from runners.backends.transformers import memory as batching

    monkeypatch.setattr(batching, "_available_ram", lambda: 64 << 30)
    budget = initial_budget(46080, "cpu")  # SmolLM2-135M in fp32: 30 layers x 3 KV heads
    # a call holds the pool and the gathered copy: two KV copies per budget token
    assert budget.tokens == (1 << 30) // (2 * 46080) and "CPU" in budget.source
    monkeypatch.setattr(batching, "_available_ram", lambda: 1 << 30)  # a small machine
    assert initial_budget(46080, "cpu").tokens == (1 << 28) // (2 * 46080)
    assert initial_budget(46080, "cpu", tokens=999, item_cap=3).tokens == 999
    assert initial_budget(1 << 30, "cpu").tokens == MIN_TOKENS  # never below the floor


def test_the_gpu_budget_counts_pool_gathered_copy_grouped_heads_and_activations(monkeypatch):
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (40 << 30, 80 << 30))
    # Llama-3-8B's shape: 32 layers, 32 query heads over 8 KV heads; bf16 KV = 131072 B/token
    config = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8)
    budget = initial_budget(131072, "cuda:0", config, dtype_bytes=2)
    per_layer_repeated = 131072 // 32 * 4  # one layer's K and V, copied to 4x the heads
    decode_head = 32000 * 4 // 32  # fp32 logits: a row per 2 x 16 new tokens' positions
    per_token = (2 * 131072 + per_layer_repeated + (4 * 4096 + 3 * 14336) * 2 + 4096
                 + decode_head)
    prefill_head = 2 * 32000 * 1024 * 4  # CUDA's 1,024 rows through the fp32 head, log-softmax
    assert budget.tokens == int(((40 << 30) * 0.5 - prefill_head) // per_token)
    assert "cuda:0" in budget.source and str(per_token) in budget.source
    plain = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=32)
    assert call_bytes_per_token(131072, plain, 2, cuda=True) == per_token - per_layer_repeated
    assert call_bytes_per_token(131072, config, 2, cuda=False) == 2 * 131072 + decode_head


def test_the_fp32_head_rows_are_counted_per_call_and_per_token(monkeypatch):
    """A 256k vocabulary (Gemma) costs a decoding call vocabulary x 4 bytes per head row,
    and prefill 128 rows of logits plus their log-softmax, whatever the model's dtype."""
    pytest.importorskip("torch")
    from transformers import LlamaConfig

    from runners.backends.transformers import memory as batching
    from runners.backends.transformers.memory import head_bytes_per_token, head_call_bytes

    big = LlamaConfig(vocab_size=256000, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4)
    assert head_call_bytes(big) == 2 * 256000 * 128 * 4
    assert head_bytes_per_token(big, max_new_tokens=16) == 256000 * 4 // 32
    assert head_bytes_per_token(big, max_new_tokens=4) == 256000 * 4 // 8  # more rows
    assert head_call_bytes(None) == head_bytes_per_token(None) == 0
    monkeypatch.setattr(batching, "_available_ram", lambda: 64 << 30)
    kv = 2 * 2 * 4 * 16 * 4  # 2 layers, K and V, 4 heads of 16, fp32
    counted = initial_budget(kv, "cpu", big, 4)
    assert counted.tokens == ((1 << 30) - 2 * 256000 * 128 * 4) // (2 * kv + 256000 * 4 // 32)
    assert counted.tokens < initial_budget(kv, "cpu").tokens  # the head is not free
    assert "head rows" in counted.source


def test_the_foreseen_budget_is_the_one_after_the_batch_succeeds():
    budget = TokenBudget(4096, "test", item_cap=4)
    budget.shrink(batch_items=4)
    budget.succeeded(2)
    ahead = budget.foreseen(2)  # planning the next batch while this one runs
    assert (budget.tokens, budget.item_limit, budget.streak) == (2048, 2, 1)  # unchanged
    budget.succeeded(2)
    assert (ahead.tokens, ahead.item_limit) == (budget.tokens, budget.item_limit) == (3072, 4)
    assert budget.foreseen().item_limit == budget.item_limit  # not reset to the cap
    assert budget.record()["batches"] == 2 and ahead.record()["batches"] == 1


def test_memory_is_freed_after_the_except_block_when_the_tracebacks_tensors_are_gone(
        monkeypatch):
    torch = pytest.importorskip("torch")
    import weakref

    from runners.plan import budget as batching

    held, alive_at_free = [], []

    def call_that_runs_out():
        activations = torch.zeros(1 << 16)  # what a failed forward leaves in its frame
        held.append(weakref.ref(activations))
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(batching, "free_memory", lambda: alive_at_free.append(held[0]() is not None))
    assert attempt(call_that_runs_out) == (None, True)
    assert alive_at_free == [False]  # emptying the cache inside `except` would free nothing
    assert attempt(lambda x: x + 1, 1) == (2, False)
    with pytest.raises(ValueError):  # not out of memory: raised as it is
        attempt(lambda: (_ for _ in ()).throw(ValueError("bad shape")))


def test_the_allocator_gets_expandable_segments_unless_the_user_configured_it():
    environ = {}
    record = configure_allocator(environ)
    assert environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert record["set_by"].startswith("fragility-tui")
    # a second run in the same process finds what the first set: still not the user's
    assert configure_allocator(environ) == record
    mine = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}
    assert configure_allocator(mine)["set_by"] == "user"
    assert mine == {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}
    newer = {"PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"}
    assert configure_allocator(newer)["variable"] == "PYTORCH_ALLOC_CONF"
    assert "PYTORCH_CUDA_ALLOC_CONF" not in newer


def _fake_gpus(monkeypatch, free_bytes: list[int]):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i=0: (free_bytes[i], 80 << 30))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(free_bytes))
    return torch


def _model_folder(tmp_path, weight_bytes: int, stored: str):
    (tmp_path / "config.json").write_text(f'{{"torch_dtype": "{stored}"}}')
    with open(tmp_path / "model.safetensors", "wb") as fh:
        fh.truncate(weight_bytes)
    return tmp_path


def test_a_model_goes_straight_onto_one_gpu_in_the_target_dtype(tmp_path, monkeypatch):
    from runners.models.load import _placement

    torch = _fake_gpus(monkeypatch, [20 << 30, 20 << 30])
    folder = _model_folder(tmp_path, 16 << 30, "float32")  # 8 GiB once in bf16
    assert _placement(folder, "cuda:1", torch.bfloat16, None) == {"device_map": {"": 1}}
    assert _placement(folder, "cpu", torch.float32, None) == {}
    # Quantised builds load on the CPU, are quantised there, then moved (int4 memory).
    assert _placement(folder, "cuda:0", torch.bfloat16, "int4") == {}


def test_a_model_too_big_for_one_gpu_is_sharded_across_them_or_refused(tmp_path, monkeypatch):
    from fragility_tui.errors import InputError
    from runners.models.load import _placement

    torch = _fake_gpus(monkeypatch, [20 << 30, 20 << 30])
    folder = _model_folder(tmp_path, 30 << 30, "bfloat16")
    placement = _placement(folder, "cuda:0", torch.bfloat16, None)
    assert placement["device_map"] == "auto"
    assert set(placement["max_memory"]) == {0, 1}  # GPUs only: never offloaded to the CPU
    _fake_gpus(monkeypatch, [20 << 30])
    with pytest.raises(InputError, match="needs about 33.0 GiB.*--quantize int8"):
        _placement(folder, "cuda:0", torch.bfloat16, None)


def test_a_failed_cpu_allocation_counts_as_out_of_memory():
    """torch's CPU allocator raises a plain RuntimeError, not OutOfMemoryError: a CPU run
    that asks for more than the machine has halves its batch like a GPU run."""
    from runners.plan.budget import is_oom

    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as failed:
        torch.empty(1 << 60, dtype=torch.uint8)
    assert is_oom(failed.value)
    assert not is_oom(RuntimeError("shape mismatch"))
