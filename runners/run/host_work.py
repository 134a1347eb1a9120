"""The run's host work beside its model calls: planning the next batch (templates,
tokenisation, prompt trees) and parsing and writing the last one run on one worker thread
while the main thread runs the current batch's forwards (docs/runner.md, *Overlap*).

- One worker, jobs in submission order: the loop submits "plan batch N+1" before it scores
  batch N and "parse and write batch N" after, so at most one batch is planned ahead and
  one waits to be written (memory stays bounded), and cells are written in batch order.
- A job's error is re-raised in the main thread when the loop asks for its result
  (`Future.result()` raises the worker's exception, its traceback included).
- With overlap off (`--no-overlap`) the same jobs run at once on the caller's thread, in the
  same order, on the same budget: the two paths make the same batches, so the same cells.
- Store access from two threads: `SerialSink` lets one thread at a time into the sink.
  `Store` opens a DuckDB connection per operation (never shared between threads) and
  `PartsStore` keeps in-memory indexes of its folder; one lock keeps both correct.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass


class HostWorker:
    """Runs host jobs on one worker thread (overlap) or at once on the caller's thread."""

    def __init__(self, overlap: bool):
        self.overlap = overlap
        self._pool = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="fragility-host")
                      if overlap else None)
        self.busy_s = 0.0  # seconds spent in jobs (read after their futures are done)

    def submit(self, job, *args) -> Future:
        if self._pool is not None:
            return self._pool.submit(self._timed, job, *args)
        future: Future = Future()
        try:
            future.set_result(self._timed(job, *args))
        except Exception as exc:  # kept for .result(), like the worker thread's
            future.set_exception(exc)
        return future

    def _timed(self, job, *args):
        started = time.perf_counter()
        try:
            return job(*args)
        finally:
            self.busy_s += time.perf_counter() - started

    def close(self) -> None:
        """Stop taking jobs; queued ones that have not started are dropped, a running one
        finishes (threads cannot be killed; a planning job takes well under a second)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


class SerialSink:
    """A CellSink that lets one thread at a time in (the loop's thread and the host
    worker both call it)."""

    def __init__(self, sink):
        self._sink = sink
        self._lock = threading.RLock()

    def __getattr__(self, name):
        value = getattr(self._sink, name)
        if not callable(value):
            return value

        def locked(*args, **kwargs):
            with self._lock:
                return value(*args, **kwargs)
        return locked


@dataclass
class HostTiming:
    """One model's scoring phase, for provenance (`host_overlap`) and the bench: wall time
    from the first batch planned to the last written, time with a model call in flight
    (runners.backends.transformers.model_calls.CallClock), and the host work (planning, parsing, writing, and the
    scorer's own Python between its calls)."""

    overlap: bool
    items: int = 0
    wall_s: float = 0.0
    model_call_s: float = 0.0
    worker_s: float = 0.0  # planning + parsing + writing
    scorer_host_s: float = 0.0  # inside scorer.score, outside model calls
    first_batch_wait_s: float | None = None  # planning the first batch: nothing else to do
    plan_workers: int = 0  # planning processes (runners.run.plan_pool); 0: the host thread

    def record(self) -> dict:
        no_call = max(0.0, self.wall_s - self.model_call_s)
        host = self.worker_s + self.scorer_host_s
        return {"overlap": self.overlap, "items": self.items, "wall_s": round(self.wall_s, 3),
                "model_call_s": round(self.model_call_s, 3),
                "no_model_call_s": round(no_call, 3),
                "no_model_call_share": round(no_call / self.wall_s, 4) if self.wall_s else None,
                "host_s": round(host, 3),
                "host_ms_per_item": round(1000 * host / self.items, 1) if self.items else None,
                "plan_parse_write_s": round(self.worker_s, 3),
                "first_batch_wait_s": (None if self.first_batch_wait_s is None
                                       else round(self.first_batch_wait_s, 3)),
                "scorer_host_s": round(self.scorer_host_s, 3),
                "plan_workers": self.plan_workers}
