"""Batch sizing: a token budget, set from the device's memory, halved on out-of-memory and
grown back.

One number, `tokens`, bounds both a batch (the unique prompt tokens of its items' prompt
trees, which is what the scorer's KV pool holds) and every decoder call in it (rows x padded
length: the scorer's `max_slots`). The run loop takes items longest first, so the largest
batches come first and an out-of-memory shows up in the first minute, not after an hour.
On out-of-memory the budget and the batch's item count are halved and the batch retried;
after GROW_AFTER successful batches the budget doubles back towards its ceiling.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

CPU_KV_BYTES = 1 << 29  # KV bytes one call may hold on a CPU (capped at a quarter of free RAM)
GPU_MEMORY_SHARE = 0.5  # share of a GPU's free memory (after loading) a batch may use
MIN_TOKENS = 256
MAX_TOKENS = 1 << 18
GROW_AFTER = 2


@dataclass
class TokenBudget:
    ceiling: int  # the starting budget, in tokens
    source: str  # how the ceiling was chosen, for provenance
    item_cap: int | None = None  # --batch-size: at most this many items per batch
    tokens: int = 0  # the budget now
    item_limit: int | None = None  # the item cap now (lowered by out-of-memory)
    streak: int = 0  # successful batches since the last change
    oom_retries: int = 0
    budgets: Counter = field(default_factory=Counter)  # tokens -> batches run with it
    items: list = field(default_factory=list)  # items per successful batch

    def __post_init__(self):
        self.tokens = self.tokens or self.ceiling
        self.item_limit = self.item_cap

    def fits(self, items: int, tokens: int) -> bool:
        """Whether a batch of `items` items and `tokens` unique tokens may take one more."""
        if items == 0:
            return True
        if self.item_limit is not None and items >= self.item_limit:
            return False
        return tokens < self.tokens

    def shrink(self, batch_items: int) -> bool:
        """After an out-of-memory on a batch of `batch_items`: halve; False when a single
        item already failed at the smallest budget (nothing left to try)."""
        if batch_items <= 1 and self.tokens <= MIN_TOKENS:
            return False
        self.oom_retries += 1
        self.tokens = max(MIN_TOKENS, self.tokens // 2)
        self.item_limit = max(1, batch_items // 2)
        self.streak = 0
        return True

    def succeeded(self, batch_items: int) -> None:
        self.budgets[self.tokens] += 1
        self.items.append(batch_items)
        self.streak += 1
        if self.streak >= GROW_AFTER and (self.tokens < self.ceiling
                                          or self.item_limit != self.item_cap):
            self._grow()

    def _grow(self) -> None:
        self.streak = 0
        self.tokens = min(self.ceiling, self.tokens * 2)
        if self.item_limit is None:
            return
        if self.item_cap is not None:
            self.item_limit = min(self.item_cap, self.item_limit * 2)
        else:  # no cap of the user's: lift the limit once the budget is whole again
            self.item_limit = None if self.tokens == self.ceiling else self.item_limit * 2

    def record(self) -> dict:
        """The effective sizes, for the run's provenance."""
        return {
            "token_budget": self.ceiling, "source": self.source,
            "item_cap": self.item_cap, "oom_retries": self.oom_retries,
            "batches": sum(self.budgets.values()),
            "budgets_used": {str(k): v for k, v in sorted(self.budgets.items())},
            "items_per_batch": ({"min": min(self.items), "max": max(self.items),
                                 "mean": round(sum(self.items) / len(self.items), 2)}
                                if self.items else None),
        }


def initial_budget(kv_bytes_per_token: int, device: str, config=None, dtype_bytes: int = 4,
                   *, tokens: int | None = None, item_cap: int | None = None) -> TokenBudget:
    """The starting budget: `tokens` when given (--batch-tokens), else from memory: on a
    CPU, CPU_KV_BYTES of keys and values (at most a quarter of the free RAM); on CUDA, a
    share of the free GPU memory over the bytes a token costs (KV plus activations)."""
    if tokens:
        return TokenBudget(tokens, "--batch-tokens", item_cap)
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        per_token = kv_bytes_per_token + _activation_bytes(config, dtype_bytes)
        budget = int(free * GPU_MEMORY_SHARE // per_token)
        source = (f"{GPU_MEMORY_SHARE:.0%} of {free / 2**30:.1f} GiB free on {device} / "
                  f"{per_token} bytes per token")
    else:
        memory = min(CPU_KV_BYTES, _available_ram() // 4)
        budget = memory // kv_bytes_per_token
        source = f"{memory / 2**30:.2f} GiB of KV on the CPU / {kv_bytes_per_token} bytes per token"
    return TokenBudget(max(MIN_TOKENS, min(MAX_TOKENS, budget)), source, item_cap)


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
