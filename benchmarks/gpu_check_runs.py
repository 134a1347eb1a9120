"""How the GPU check scores: items planned into batches at a token budget and scored the way
a run scores them (runners/run/batch_loop.py: the next batch planned on the host worker
while the current one runs; cells parsed with the model's dtype's near-tie tolerance), and
the comparison of two passes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Pass:
    """One pass over the items: its cells and what it cost."""

    cells: dict = field(default_factory=dict)  # (item uid, config) -> CellRow
    tokens: int = 0  # prompt and decode tokens forwarded
    seconds: float = 0.0  # wall time of the batches, planning that did not overlap included
    batches: int = 0
    budgets: list = field(default_factory=list)  # the budget each batch ran at
    stats: object = None  # the batches' ScoreStats, summed

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def sync(device: str) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def score_pass(loaded, scorer, items: list, configs: list, budget, *, order=None,
               seed: int = 0, on_batch=None, max_batches: int | None = None,
               plan_workers: int = 0) -> Pass:
    """Score `items` (in `order` when given) in batches that fit `budget` (a TokenBudget,
    shrunk and retried on out-of-memory as a run does). `on_batch(number)` runs before each
    batch's calls (the check injects an out-of-memory there); `max_batches` stops the pass
    after that many batches have run; `plan_workers`: planned in that many processes
    (runners/run/plan_pool.py) instead of on the host thread, as `run --plan-workers`."""
    from functools import partial

    from runners.plan.budget import attempt
    from runners.plan.item_requests import ItemPlanner, cells_for
    from runners.plan.numerics import tolerance
    from runners.run.host_work import HostWorker
    from runners.run.plan_pool import PlanPool

    items = [items[i] for i in order] if order else list(items)
    planner = ItemPlanner(loaded, [(item, list(configs)) for item in items], seed,
                          own_tokenizer=True,
                          processes=partial(PlanPool, workers=plan_workers) if plan_workers
                          else None)
    worker, done, limits = HostWorker(True), Pass(), tolerance(loaded.dtype)
    sync(loaded.device)
    started = time.perf_counter()
    try:
        upcoming = worker.submit(planner.batch, budget.foreseen())
        while True:
            chunk = upcoming.result()
            if not chunk or done.batches == max_batches:
                break
            upcoming = worker.submit(planner.batch, budget.foreseen(len(chunk)))
            gen = [r for planned in chunk for r in planned.gen]
            lik = [r for planned in chunk for r in planned.lik]

            def call(number=done.batches + 1):
                if on_batch is not None:
                    on_batch(number)
                return scorer.score(gen, lik, max_slots=budget.tokens)

            result, oom = attempt(call)
            if oom:
                scorer.forget_kept_memory()
                planner.put_back(chunk + upcoming.result())
                if not budget.shrink(len(chunk)):
                    raise RuntimeError(f"out of memory at the smallest budget, {budget.tokens}")
                upcoming = worker.submit(planner.batch, budget.foreseen())
                continue
            done.budgets.append(budget.tokens)
            budget.succeeded(len(chunk))
            done.batches += 1
            done.tokens += result.stats.forwarded
            if done.stats is None:
                done.stats = type(result.stats)()
            done.stats.add(result.stats)
            for planned in chunk:
                for cell in cells_for(planned.plan, result, loaded.name, None, 0.0, limits):
                    done.cells[(cell.item_uid, cell.config_id)] = cell
        sync(loaded.device)
        done.seconds = time.perf_counter() - started
    finally:
        worker.close()
        planner.close()
    return done


def count_syncs(device: str, run):
    """(run()'s result, the synchronising CUDA calls torch flagged while it ran:
    `torch.cuda.set_sync_debug_mode("warn")`, which misses some; None off CUDA). Each
    flagged call costs a Python warning: count in a pass that is not the one timed."""
    import warnings

    import torch

    if not device.startswith("cuda"):
        return run(), None
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return result, sum("synchroniz" in str(w.message).lower() for w in caught)


def busy_share(device: str, run):
    """(run()'s result, the share of its wall time the GPU was busy; None off CUDA). Busy:
    the union of the intervals of every kernel and copy CUPTI recorded (torch.profiler with
    device activity only, issue 59 item 7), over the pass's wall time with the device
    synchronised at its end. The profiler's own cost is in that wall time, so the share is,
    if anything, understated. Where the profiler cannot record the device, the run is not
    repeated: (its result, the error as text)."""
    import torch

    if not device.startswith("cuda"):
        return run(), None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            started = time.perf_counter()
            result = run()
            torch.cuda.synchronize()
            wall = time.perf_counter() - started
        spans = [(e.time_range.start, e.time_range.end) for e in prof.events()
                 if e.device_type != DeviceType.CPU]
    except RuntimeError as exc:  # e.g. no CUPTI in this build: the row says so
        return run(), f"n/a: {exc}"
    return result, covered_us(spans) / 1e6 / wall


def covered_us(spans) -> float:
    """The length of the union of (start, end) intervals: overlapping kernels (streams, a
    copy beside a kernel) count once."""
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end <= reach:
            continue
        covered += end - max(start, reach)
        reach = end
    return covered


def flips(reference: dict, other: dict) -> tuple[list, list]:
    """(cells whose prediction differs, those of them that neither pass flagged near_tie):
    each pass's near_tie comes from its own dtype's tolerance (cells_for)."""
    moved = [key for key in reference if key in other and reference[key].pred != other[key].pred]
    outside = [key for key in moved if not (reference[key].near_tie or other[key].near_tie)]
    return moved, outside


def near_tie_share(cells: dict) -> str:
    gen = [c for c in cells.values() if c.scores is None]
    lik = [c for c in cells.values() if c.scores is not None]
    return (f"near-ties {sum(bool(c.near_tie) for c in gen)}/{len(gen)} generation, "
            f"{sum(bool(c.near_tie) for c in lik)}/{len(lik)} likelihood")


def dense_rate(model, device: str, rows: int, length: int, repeats: int = 3) -> float:
    """Tokens per second of the decoder alone (no head, no cache, no mask) over a dense
    [rows, length] batch of random ids, best of `repeats` after a warm-up, the device
    synchronised around each timing: the yardstick of a run's throughput."""
    import torch

    backbone = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    vocab = model.config.get_text_config().vocab_size
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (rows, length), generator=generator).to(device)
    best = float("inf")
    with torch.no_grad():
        backbone(input_ids=ids, use_cache=False)  # warm-up: kernels chosen, memory taken
        for _ in range(repeats):
            sync(device)
            started = time.perf_counter()
            backbone(input_ids=ids, use_cache=False)
            sync(device)
            best = min(best, time.perf_counter() - started)
    return rows * length / best
