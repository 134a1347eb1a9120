"""Planning in worker processes (issue 59 item 2): rendering, tokenising and each item's
prompt tree run in a pool of processes, a few chunks of items ahead of the batch that needs
them, so the thread launching the device's kernels never waits on the GIL for them (on
threads the two ran at 0.60x and 0.49x of their speed alone: nearly serial).

- The workers are started with "spawn" (the parent holds torch and maybe CUDA, which a
  fork must not copy) and given the run's encoder (the tokenizer pickled), seed and
  example pools once; a job is a chunk of the run's (item, configs) pairs by position and
  comes back as PlannedItems in order, so the batches are those in-thread planning makes.
- At most `ahead` chunks are in flight or waiting, so memory stays bounded however many
  items a run has.
- A worker that dies (killed, out of memory) breaks the pool: the next item asked for
  raises PlanWorkerDied naming the item range, which the run records as its failure.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from runners.run.failure import RunFailed

CHUNK_ITEMS = 8  # items per job: a job's pickling costs about as much as one item's plan
AHEAD_CHUNKS_PER_WORKER = 2


class PlanWorkerDied(RunFailed):
    """A planning process ended without its result: the run fails with this reason."""


def auto_workers(device: str, cpus: int | None = None) -> int:
    """Planning processes for `--plan-workers auto`: none on a CPU (its cores run the
    model; the host thread plans beside it), else all cores but two, at most 8."""
    if cpus is None:
        cpus = os.cpu_count() or 1
    if not str(device).startswith("cuda"):
        return 0
    return max(0, min(8, cpus - 2))


_STATE: dict = {}  # in a worker: what its initializer was given


def _start(encoder, seed: int, pools) -> None:
    _STATE.update(encoder=encoder, seed=seed, pools=pools)


def _plan_chunk(todo: list) -> list:
    from runners.plan.item_requests import plan_one

    return [plan_one(_STATE["encoder"], item, configs, _STATE["seed"], _STATE["pools"])
            for item, configs in todo]


class PlanPool:
    """The run's items planned by `workers` processes, handed out one by one in order."""

    def __init__(self, encoder, todo: list, seed: int, pools, workers: int, *,
                 chunk: int = CHUNK_ITEMS, ahead: int | None = None):
        self.todo, self.chunk = todo, chunk
        self.ahead = ahead or AHEAD_CHUNKS_PER_WORKER * workers
        self.executor = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start,
            initargs=(encoder, seed, pools))
        self.submitted = 0  # todo positions handed to the pool so far
        self.waiting: deque = deque()  # (first position, future) in order
        self.ready: deque = deque()

    def take(self):
        """The next item's PlannedItem (IndexError past the last one)."""
        if not self.ready:
            self._top_up()
            if not self.waiting:
                raise IndexError("every item is planned")
            first, future = self.waiting.popleft()
            try:
                self.ready.extend(future.result())
            except BrokenProcessPool as exc:
                self.close()
                raise PlanWorkerDied(
                    f"a planning process died while planning items {first + 1}-"
                    f"{min(first + self.chunk, len(self.todo))} of {len(self.todo)} "
                    f"({exc}); the run's cells so far are kept: resume it with --resume, "
                    "or plan on the host thread with --plan-workers 0") from None
        self._top_up()
        return self.ready.popleft()

    def _top_up(self) -> None:
        while len(self.waiting) < self.ahead and self.submitted < len(self.todo):
            first = self.submitted
            self.submitted = min(first + self.chunk, len(self.todo))
            self.waiting.append((first, self.executor.submit(
                _plan_chunk, self.todo[first:self.submitted])))

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
