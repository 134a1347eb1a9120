"""One model's batches: plan, score, parse and write, with the host's part beside the
device's (runners.run.host_work; docs/runner.md, *Overlap*).

While batch N's model calls run on the main thread, the host worker plans batch N+1 and
parses and writes batch N-1. Each batch's cells are one store transaction, committed in
batch order; a batch handed to the worker is committed before the run ends (finished,
cancelled or failed), so a kill -9 loses at most the batch being scored and the one being
written, and a resume completes exactly the missing cells (the store's done keys).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

from fragility_tui.store.runs import RunStatus
from runners.run.host_work import HostTiming, HostWorker
from runners.run.plan_pool import PlanPool, auto_workers
from fragility_tui.harness.fewshot import pools_by_benchmark
from runners.plan.item_requests import ItemPlanner
from runners.plan.score_types import ScoreStats


def plan_workers(spec, device: str) -> int:
    """Planning processes for this model: `--plan-workers N`, or by the device (auto)."""
    if spec.plan_workers is None:
        return auto_workers(device)
    return spec.plan_workers


@dataclass
class _Writing:
    """The batch the host worker is parsing and writing."""

    future: object  # concurrent.futures.Future -> (cells, cells new to the store)
    chunk: list
    stats: ScoreStats


@dataclass
class ModelBatches:
    run: object  # runners.run.loop.Run: its store, events, counters and provenance
    model: str  # the grid's model name
    loaded: object
    scorer: object
    budget: object  # runners.plan.budget.TokenBudget
    totals: ScoreStats = field(default_factory=ScoreStats)
    item_trees: int = 0
    writing: _Writing | None = None
    mark: float = 0.0  # when the last batch was counted (the run's scoring_seconds)

    def run_batches(self, todo: list, stopper) -> str:
        run, spec = self.run, self.run.spec
        overlap = spec.overlap and run.backend.overlaps_host_work
        encoder = run.backend.text_encoder(self.scorer)
        workers = plan_workers(spec, self.loaded.device) if encoder is None and todo else 0
        planner = ItemPlanner(self.loaded, todo, spec.seed, encoder, own_tokenizer=overlap,
                              pools=pools_by_benchmark(run.inputs.pool or run.inputs.items),
                              processes=partial(PlanPool, workers=workers) if workers else None)
        worker, timing = HostWorker(overlap), HostTiming(overlap, items=len(todo))
        timing.plan_workers = workers
        clock = getattr(getattr(self.scorer, "calls", None), "clock", None)
        calls_before, started = clock.seconds if clock else 0.0, time.perf_counter()
        self.mark = time.monotonic()  # rates count scoring, not loading
        try:
            return self._batches(planner, worker, stopper, timing, clock)
        finally:
            try:  # the batch handed to the worker is committed before the run ends
                self._collect()
            finally:
                worker.close()
                planner.close()
                timing.wall_s = time.perf_counter() - started
                timing.model_call_s = (clock.seconds - calls_before if clock
                                       else timing.wall_s)  # served: the server's calls
                timing.worker_s = worker.busy_s
                record = timing.record()
                run.provenance.setdefault("host_overlap", {})[self.model] = record
                run.session.setdefault("host_overlap", {})[self.model] = record

    def _batches(self, planner, worker, stopper, timing, clock) -> str:
        from runners.plan.budget import attempt
        from runners.run.failure import RunFailed

        run, budget, name = self.run, self.budget, self.model
        # Planned on the budget as it will be when the batch before has succeeded: the
        # batches are the same with overlap on or off (TokenBudget.foreseen).
        planning = time.perf_counter()
        upcoming = worker.submit(planner.batch, budget.foreseen())
        while True:
            chunk = upcoming.result()  # a planning error is raised here, with its traceback
            if timing.first_batch_wait_s is None:  # the device idles until the first plan
                timing.first_batch_wait_s = time.perf_counter() - planning
            if not chunk:
                return RunStatus.FINISHED
            if stopper.should_stop():  # also catches a cancel that came during loading
                return RunStatus.CANCELLED  # the batch being written is committed first
            upcoming = worker.submit(planner.batch, budget.foreseen(len(chunk)))
            t0, calls0 = time.perf_counter(), clock.seconds if clock else 0.0
            # The cache is freed after the failed call's traceback is gone (runners.plan.budget.attempt).
            result, oom = attempt(run.score_chunk, self.loaded, self.scorer, chunk,
                                  budget.tokens)
            if clock:
                timing.scorer_host_s += max(0.0, time.perf_counter() - t0
                                            - (clock.seconds - calls0))
            if oom:
                forget = getattr(self.scorer, "forget_kept_memory", None)
                if forget:  # kept at the size that failed: made again at the new budget's
                    forget()
                planner.put_back(chunk + upcoming.result())  # planned again on the new budget
                if not budget.shrink(len(chunk)):
                    raise RunFailed(f"out of memory on {name} even with one item per batch "
                                    f"and a budget of {budget.tokens} tokens "
                                    f"({self.loaded.device}); try --dtype bf16, --quantize "
                                    "int8 or a smaller model")
                run.emit("oom_retry", model=name, batch_size=budget.item_limit,
                         batch_tokens=budget.tokens)
                upcoming = worker.submit(planner.batch, budget.foreseen())
                continue
            budget.succeeded(len(chunk))
            self._collect()  # the batch before: written while this one's calls ran
            self.writing = _Writing(worker.submit(self._write, chunk, result), chunk,
                                    result.stats)

    def _write(self, chunk: list, result) -> tuple[int, int]:
        """On the host worker: parse the batch's outputs into cells and commit them in one
        transaction; (cells, cells new to the store)."""
        rows = self.cells(chunk, result)
        return len(rows), self.run.store.write_cells(self.run.spec.grid, rows)

    def cells(self, chunk: list, result) -> list:
        from runners.plan.item_requests import cells_for
        from runners.plan.numerics import tolerance

        loaded = self.loaded
        ms_per_token = 1000.0 * result.stats.seconds / max(
            1, sum(sum(p.plan.prompt_tokens.values()) for p in chunk))
        return [row for planned in chunk
                for row in cells_for(planned.plan, result, loaded.name, self.run.run_id,
                                     ms_per_token, tolerance(loaded.dtype))]

    def _collect(self) -> None:
        """Wait for the batch being written (its error is raised here) and count it."""
        if self.writing is None:
            return
        writing, self.writing = self.writing, None
        cells, written = writing.future.result()
        run, stats, name = self.run, writing.stats, self.model
        run.cells_done += written
        run.session["cells_written"] += written
        run.tokens += stats.forwarded
        now = time.monotonic()
        run.scoring_seconds += now - self.mark
        self.mark = now
        self.totals.add(stats)
        self.item_trees += sum(p.unique_tokens for p in writing.chunk)
        batching = run.provenance.setdefault("batching", {})
        batching[name] = dict(self.budget.record(), layout=self.scorer.layout,
                              tokens=self.totals.token_record(self.item_trees))
        # This session's effective batching (a resumed run's sessions each keep theirs).
        run.session.setdefault("batching", {})[name] = {
            k: batching[name].get(k) for k in ("token_budget", "items_per_batch",
                                               "batches", "oom_retries")}
        run.report_progress(name, cells, stats.forwarded)
