"""Batch sizing: a token budget, set from the device's memory, halved on out-of-memory and
grown back.

One number, `tokens`, bounds both a batch (the unique prompt tokens of its items' prompt
trees, which is what the scorer's KV pool holds) and every decoder call in it (rows x padded
length: the scorer's `max_slots`). So a call holds, per budget token, the pool's keys and
values, the gathered copy of them its cache rows are built from, and (grouped-query heads
under a mask, where SDPA cannot read the shared heads itself) one layer's per-head copy,
plus the call's activations and its fp32 head rows: `call_bytes_per_token` counts all of
them (the prefill head's fixed chunk is taken off the memory first). Items run in a
seeded random order (runners.item_requests), so an out-of-memory batch may come at any
point of a run, not only first. On out-of-memory the budget and the batch's item count are
halved and the batch retried; after GROW_AFTER successful batches the budget doubles back
towards its ceiling, but never back up to a budget that already failed.

On a GPU a model's first batches ramp up (RAMP_STEPS): they take 1/8, 1/4 and 1/2 of the
budget's tokens, then the whole. The device waits while the first batch is planned
(templates, tokenisation, prompt trees: ~18 ms an item with 26 configs on a 2-core CPU, so
~5 s for a 300-item batch); a small first batch starts it sooner, and each later batch is
planned while the one before runs (runners.host_work). Calls keep the whole budget as their
bound. Not on a CPU, where the forwards take ~100x longer than planning: there the extra
batches (each with its own decoding tail) cost more than the wait they save.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace

CPU_CALL_BYTES = 1 << 30  # bytes one call may hold on a CPU (capped at a quarter of free RAM)
GPU_MEMORY_SHARE = 0.5  # share of a GPU's free memory (after loading) a batch may use
MIN_TOKENS = 256
MAX_TOKENS = 1 << 18
GROW_AFTER = 2
RAMP_STEPS = 3  # first GPU batches at budget/8, /4, /2: the device starts before much is planned
FP32_BYTES = 4  # the output head and log-softmax run in fp32 (runners.model_probe)


@dataclass
class TokenBudget:
    ceiling: int  # the starting budget, in tokens
    source: str  # how the ceiling was chosen, for provenance
    item_cap: int | None = None  # --batch-size: at most this many items per batch
    tokens: int = 0  # the budget now
    item_limit: int | None = None  # the item cap now (lowered by out-of-memory)
    streak: int = 0  # successful batches since the last change
    oom_retries: int = 0
    failed: int | None = None  # the smallest budget that ran out of memory
    budgets: Counter = field(default_factory=Counter)  # tokens -> batches run with it
    items: list = field(default_factory=list)  # items per successful batch
    ramp: int = 0  # ramp-up batches left: the next batch plans on tokens >> ramp

    def __post_init__(self):
        self.tokens = self.tokens or self.ceiling
        self.item_limit = self.item_cap

    def batch_tokens(self) -> int:
        """The unique tokens the next batch may hold (less than `tokens` while ramping up)."""
        return max(MIN_TOKENS, self.tokens >> self.ramp) if self.ramp else self.tokens

    def fits(self, items: int, tokens: int) -> bool:
        """Whether a batch of `items` items and `tokens` unique tokens may take one more."""
        if items == 0:
            return True
        if self.item_limit is not None and items >= self.item_limit:
            return False
        return tokens < self.batch_tokens()

    def foreseen(self, batch_items: int | None = None) -> "TokenBudget":
        """A copy to plan the next batch with while the current one runs: this budget as
        it will be once the batch of `batch_items` items has succeeded (if it runs out of
        memory instead, the planned batch is put back and planned again). Planning with it
        makes the same batches whether or not planning runs ahead (runners.host_work)."""
        view = replace(self, budgets=Counter(), items=[])
        view.item_limit = self.item_limit  # __post_init__ reset it to the cap
        if batch_items is not None:
            view.succeeded(batch_items)
        return view

    def shrink(self, batch_items: int) -> bool:
        """After an out-of-memory on a batch of `batch_items`: halve; False when a single
        item already failed at the smallest budget (nothing left to try)."""
        if batch_items <= 1 and self.tokens <= MIN_TOKENS:
            return False
        self.oom_retries += 1
        self.failed = min(self.failed or self.tokens, self.tokens)
        self.tokens = max(MIN_TOKENS, self.tokens // 2)
        self.item_limit = max(1, batch_items // 2)
        self.streak = self.ramp = 0  # the calls' bound failed: no smaller batches to ramp
        return True

    def succeeded(self, batch_items: int) -> None:
        self.budgets[self.batch_tokens()] += 1
        self.items.append(batch_items)
        if self.ramp:
            self.ramp -= 1
            return
        self.streak += 1
        if self.streak >= GROW_AFTER and (self.tokens < self.top()
                                          or self.item_limit != self.item_cap):
            self._grow()

    def top(self) -> int:
        """The largest budget growth may reach: the ceiling, or three quarters of the
        smallest budget that ran out of memory (memory that failed once, through
        fragmentation or another process, fails again)."""
        if self.failed is None:
            return self.ceiling
        return max(MIN_TOKENS, min(self.ceiling, self.failed * 3 // 4))

    def _grow(self) -> None:
        self.streak = 0
        self.tokens = max(self.tokens, min(self.top(), self.tokens * 2))
        if self.item_limit is None:
            return
        if self.item_cap is not None:
            self.item_limit = min(self.item_cap, self.item_limit * 2)
        else:  # no cap of the user's: lift the limit once the budget is whole again
            self.item_limit = None if self.tokens == self.top() else self.item_limit * 2

    def record(self) -> dict:
        """The effective sizes, for the run's provenance."""
        return {
            "token_budget": self.ceiling, "source": self.source,
            "item_cap": self.item_cap, "oom_retries": self.oom_retries,
            "failed_budget": self.failed,
            "batches": sum(self.budgets.values()),
            "budgets_used": {str(k): v for k, v in sorted(self.budgets.items())},
            "items_per_batch": ({"min": min(self.items), "max": max(self.items),
                                 "mean": round(sum(self.items) / len(self.items), 2)}
                                if self.items else None),
        }


class SchedulesOwnMemory:
    """A backend whose engine or server schedules its own memory (vLLM, a served model): its
    batch is only a store transaction's size, the user's --batch-tokens or a fixed default."""

    budget_flag = "--batch-tokens"
    budget_default: int
    budget_source: str  # why the default, for provenance
    ramp_steps = 0  # RAMP_STEPS for an engine on the local GPU (vLLM); a server plans in line

    def token_budget(self, tokens: int | None, item_cap: int | None) -> TokenBudget:
        if tokens:
            return TokenBudget(tokens, self.budget_flag, item_cap, ramp=self.ramp_steps)
        return TokenBudget(self.budget_default, self.budget_source, item_cap,
                           ramp=self.ramp_steps)


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
    head = head_call_bytes(config)
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


def head_call_bytes(config) -> int:
    """The prefill head's peak, whatever the budget: PendingLogprobs sends CHUNK_ROWS rows
    at a time through the fp32 head and log-softmax (two vocabulary x rows x 4-byte
    tensors)."""
    from runners.prefill import PendingLogprobs

    return 2 * _vocab(config) * PendingLogprobs.CHUNK_ROWS * FP32_BYTES


def head_bytes_per_token(config, max_new_tokens: int = 16) -> int:
    """The fp32 logits of a decoding step, per budget token: a decoding row is at least
    2 x DECODE_GROUP_LEAVES x max_new_tokens positions wide and holds at most
    DECODE_GROUP_LEAVES leaves (runners.decoding.take_rows), so a call's head rows are at
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


# -- out of memory ----------------------------------------------------------------------------

class RunFailed(Exception):
    """A run stopped by an error that is not the user's input (out of memory even at the
    smallest budget, disk full, ...); runners.loop records it as the run's failure."""


# What torch's allocators say when memory runs out: CUDA's raise OutOfMemoryError; the CPU's
# raises a plain RuntimeError ("DefaultCPUAllocator: can't allocate memory: ...").
OOM_MESSAGES = ("out of memory", "can't allocate memory", "not enough memory")


def is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc).lower() for m in OOM_MESSAGES)


def attempt(call, *args):
    """(call(*args), False), or (None, True) when it ran out of memory. The cache is
    emptied only after the `except` block has ended: until then the exception's traceback
    holds the failed call's frames and with them its tensors, so memory freed inside the
    block is not yet free."""
    try:
        return call(*args), False
    except Exception as exc:
        if not is_oom(exc):
            raise
    free_memory()
    return None, True


def free_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def configure_allocator(environ=os.environ) -> dict:
    """Ask PyTorch's CUDA allocator for expandable segments (a budget halved after an
    out-of-memory then fits into the freed memory instead of beside fragments of it),
    unless the user configured the allocator. Must run before CUDA is first used; what was
    decided goes into the run's provenance."""
    import sys

    torch = sys.modules.get("torch")
    late = bool(torch is not None and torch.cuda.is_initialized())
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        if environ.get(name):
            return {"variable": name, "value": environ[name], "set_by": "user"}
    environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    # In a process that already used CUDA (a Ray worker reused) the allocator is set up.
    return {"variable": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True",
            "set_by": "fragility-tui" + (" (too late: CUDA already initialised)" if late else "")}
