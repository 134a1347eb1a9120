"""The generic token budget: how many prompt tokens a batch and each of its model calls may
hold, halved on out-of-memory and grown back, and how an out-of-memory is recognised.

One number, `tokens`, bounds both a batch (the unique prompt tokens of its items' prompt
trees, which is what the transformers scorer's KV pool holds) and every decoder call in it
(rows x padded length: the scorer's `max_slots`). Items run in a seeded random order
(runners.plan.item_requests), so an out-of-memory batch may come at any point of a run, not
only first. On out-of-memory the budget and the batch's item count are halved and the batch
retried; after GROW_AFTER successful batches the budget doubles back towards its ceiling,
but never back up to a budget that already failed.

On a GPU a model's first batches ramp up (RAMP_STEPS): they take 1/8, 1/4 and 1/2 of the
budget's tokens, then the whole. The device waits while the first batch is planned
(templates, tokenisation, prompt trees: ~18 ms an item with 26 configs on a 2-core CPU, so
~5 s for a 300-item batch); a small first batch starts it sooner, and each later batch is
planned while the one before runs (runners.run.host_work). Calls keep the whole budget as
their bound. Not on a CPU, where the forwards take ~100x longer than planning: there the
extra batches (each with its own decoding tail) cost more than the wait they save.

Where the ceiling comes from is the backend's business: the transformers backend sizes it
from the device's memory (runners.backends.transformers.memory); an engine or server that
schedules its own memory takes a fixed one (SchedulesOwnMemory).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

MIN_TOKENS = 256
MAX_TOKENS = 1 << 18
GROW_AFTER = 2
RAMP_STEPS = 3  # first GPU batches at budget/8, /4, /2: the device starts before much is planned


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
        makes the same batches whether or not planning runs ahead (runners.run.host_work)."""
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


# -- out of memory ---# What torch's allocators say when memory runs out: CUDA's raise OutOfMemoryError; the CPU's
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
