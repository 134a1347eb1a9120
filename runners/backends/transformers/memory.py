"""The transformers backend's memory sizing: the token budget's ceiling from the device's
memory (runners.plan.budget holds the budget itself).

A call holds, per budget token, the KV pool's keys and values, the gathered copy of them its
cache rows are built from, and (grouped-query heads under a mask, where SDPA cannot read the
shared heads itself) one layer's per-head copy, plus the call's activations and its fp32
head rows: `call_bytes_per_token` counts all of them (the prefill head's fixed chunk is
taken off the memory first).
"""

from __future__ import annotations

import os

from runners.plan.budget import MAX_TOKENS, MIN_TOKENS, RAMP_STEPS, TokenBudget

CPU_CALL_BYTES = 1 << 30  # bytes one call may hold on a CPU (capped at a quarter of free RAM)
GPU_MEMORY_SHARE = 0.5  # share of a GPU's free memory (after loading) a batch may use
FP32_BYTES = 4  # the output head and log-softmax run in fp32 (model_probe)


def initial_budget(kv_bytes_per_token: int, device: str, config=None, dtype_bytes: int = 4,
                   *, tokens: int | None = None, item_cap: int | None = None,
                   max_new_tokens: int = 16) -> TokenBudget:
    """The starting budget: `tokens` when given (--batch-tokens), else from memory: on a
    CPU, CPU_CALL_BYTES (at most a quarter of the free RAM); on CUDA, a share of the free
    GPU memory; less the prefill head's fixed rows (`head_call_bytes`), over what one
    budget token costs a call (`call_bytes_per_token`)."""
    cuda = device.startswith("cuda")
    ramp = RAMP_STEPS if cuda else 0
    if tokens:
        return TokenBudget(tokens, "--batch-tokens", item_cap, ramp=ramp)
    per_token = call_bytes_per_token(kv_bytes_per_token, config, dtype_bytes, cuda=cuda,
                                     max_new_tokens=max_new_tokens)
    head = head_call_bytes(config, device)
    if cuda:
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        budget = int(max(0, free * GPU_MEMORY_SHARE - head) // per_token)
        source = (f"{GPU_MEMORY_SHARE:.0%} of {free / 2**30:.1f} GiB free on {device}, less "
                  f"{head} bytes of head rows / {per_token} bytes per token")
    else:
        memory = min(CPU_CALL_BYTES, _available_ram() // 4)
        budget = max(0, memory - head) // per_token
        source = (f"{memory / 2**30:.2f} GiB on the CPU, less {head} bytes of head rows / "
                  f"{per_token} bytes per token")
    return TokenBudget(max(MIN_TOKENS, min(MAX_TOKENS, budget)), source, item_cap,
                       ramp=ramp)


def call_bytes_per_token(kv_bytes_per_token: int, config=None, dtype_bytes: int = 4, *,
                         cuda: bool, max_new_tokens: int = 16) -> int:
    """What one budget token costs a decoder call at its peak: the KV pool's copy, the
    gathered copy the call's cache rows are built from (both scale with the budget: the
    pool holds the batch's tokens, a call gathers up to the budget), the fp32 head rows of
    decoding (`head_bytes_per_token`), and on CUDA one layer's per-query-head copy of keys
    and values (transformers repeats grouped heads when a mask is passed, which the scorer
    always does; on the CPU the scorer sets TRANSFORMERS_SDPA_FORCE_GQA, so SDPA reads the
    shared heads) plus the activations."""
    per_token = 2 * kv_bytes_per_token + head_bytes_per_token(config, max_new_tokens)
    if cuda:
        per_token += _grouped_head_copy(kv_bytes_per_token, config)
        per_token += _activation_bytes(config, dtype_bytes)
    return per_token


def _vocab(config) -> int:
    if config is None:
        return 0
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(getattr(text, "vocab_size", 0) or 0)


def head_call_bytes(config, device: str = "cpu") -> int:
    """The prefill head's peak, whatever the budget: PendingLogprobs sends the device's
    chunk_rows rows at a time through the fp32 head and log-softmax (two vocabulary x rows
    x 4-byte tensors)."""
    from runners.backends.transformers.prefill import constants_for

    return 2 * _vocab(config) * constants_for(device).chunk_rows * FP32_BYTES


def head_bytes_per_token(config, max_new_tokens: int = 16) -> int:
    """The fp32 logits of a decoding step, per budget token: a decoding row is at least
    2 x DECODE_GROUP_LEAVES x max_new_tokens positions wide and holds at most
    DECODE_GROUP_LEAVES leaves (runners.backends.transformers.decoding.take_rows), so a call's head rows are at
    most one per 2 x max_new_tokens budget tokens, each vocabulary x 4 bytes."""
    return _vocab(config) * FP32_BYTES // (2 * max(1, max_new_tokens))


def _grouped_head_copy(kv_bytes_per_token: int, config) -> int:
    """Bytes per token of one layer's keys and values repeated to every query head."""
    if config is None:
        return 0
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = getattr(text, "num_attention_heads", None)
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    layers = getattr(text, "num_hidden_layers", None)
    if not heads or not layers or heads == kv_heads:
        return 0  # no grouped heads: nothing is repeated
    return kv_bytes_per_token // layers * heads // kv_heads


def _activation_bytes(config, dtype_bytes: int) -> int:
    """A generous per-token estimate of a call's transient activations (hidden states,
    the MLP's intermediate, a row of the additive mask)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden = getattr(text, "hidden_size", 4096)
    intermediate = getattr(text, "intermediate_size", 4 * hidden)
    return (4 * hidden + 3 * intermediate) * dtype_bytes + 4096


def _available_ram() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not a POSIX system
        return 8 << 30
