"""`fragility-tui compare A B`: the sequential comparison of issue 45, which stops when the
answer is settled.

Items are taken in the seeded order (stratified by benchmark for the balanced target), chunk
by chunk; after each chunk the pair's confidence sequences are updated
(analysis/sequential.py) and the comparison stops when settled: a winner, equivalence within
the margin, a budget or the pool's end.

- `--grid NAME` alone replays the decision over cells already in the grid. A grid whose
  pair lacks cells for an item in the order stops there ('awaiting-cells'): the path up to
  it is the one a resumed run would follow.
- `--items SRC --grid NAME` drives the live runner (commands/compare_live.py): each chunk's
  items are evaluated for both models by the ordinary run loop into the grid, then judged
  from the stored cells; rerunning the same command continues where it stopped.
"""

from __future__ import annotations

import json
import sys

from fragility_tui.commands.compare_text import (alpha_words, other_words, points, pool_delta,
                                                 reading, reversed_words, seq, verdict)
from fragility_tui.errors import InputError

# the comparisons table records a comparison's chunk in an INTEGER column (store/schema.py):
# 2**31 items a chunk failed its insert (exit 1)
CHUNK_MAX = 2 ** 31 - 1


def register(sub) -> None:
    from fragility_tui.commands.compare_live import RUN_FLAGS
    from fragility_tui.commands.run_options import add_run_options

    p = sub.add_parser("compare", help="a sequential comparison of two models that stops "
                                       "when the answer is settled (live runs with --items, "
                                       "or a replay over a grid's cells)")
    p.add_argument("a", metavar="A", help="first model (Δ = A - B): its name in the grid; "
                   "with --items a model spec as run's --model takes (alias, folder, hub id), "
                   "NAME+int4 or NAME+int8 for its quantised build")
    p.add_argument("b", metavar="B", help="second model")
    p.add_argument("--grid", required=True, metavar="NAME",
                   help="the grid read (replay) or written (with --items; created if absent)")
    p.add_argument("--items", action="append", metavar="SRC",
                   help="evaluate live: the pool is the item set `run --items SRC` samples "
                        "(--per-benchmark, the grid's seed); both models run on each chunk's "
                        "items into --grid, and rerunning the command resumes; repeat for "
                        "several sources")
    p.add_argument("--reference", metavar="CONFIG",
                   help="config the decision is made at (default o0.letter when the grid "
                        "(or --configs) has it, else its first config in canonical order)")
    p.add_argument("--target", choices=["observed", "balanced"], default="observed",
                   help="decision target (balanced: every benchmark weighs the same, items "
                        "drawn stratified by benchmark)")
    p.add_argument("--margin", type=float, default=2.0, metavar="POINTS",
                   help="practical margin m in accuracy points, at least 0 and below 100 "
                        "(default 2)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the item order (default 0). The pair's first comparison "
                        "in a grid (per reference and target) is recorded with its seed; a "
                        "later one with another seed or reference reports that the first "
                        "verdict stands and is not independent evidence (JSON "
                        "first_comparison, independent_evidence)")
    p.add_argument("--chunk", type=int, default=25, metavar="N",
                   help=f"items per chunk between decisions (default 25), at most {CHUNK_MAX:,}")
    p.add_argument("--max-items", type=int, default=None, metavar="N",
                   help="budget: stop after this many items (default: the whole pool)")
    p.add_argument("--max-seconds", type=float, default=None, metavar="S",
                   help="with --items, budget: start no chunk once the comparison's runs "
                        "have recorded S seconds (their run rows' seconds, model loading "
                        "included; checked between chunks)")
    p.add_argument("--max-tokens", type=int, default=None, metavar="T",
                   help="with --items, budget: start no chunk once the comparison's runs "
                        "have recorded T tokens (the tokens the runner forwards through the "
                        "model, its run rows' `tokens`; checked between chunks)")
    p.add_argument("--scope", choices=["population", "pool"], default="population",
                   help="what the sequences cover: the population of items the pool stands "
                        "for (default, as SPEC 9's bootstrap), or the pool's own Δ (exact at "
                        "the pool's end)")
    p.add_argument("--grid-seed", type=int, default=None, metavar="S",
                   help="with --items: run's --seed for the chunks' runs (item sampling and "
                        "option shuffles; default the grid's own seed, 0 for a new grid)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (with "
                   "--items the progress lines go to stderr)")
    add_run_options(p, only=RUN_FLAGS, title="with --items: how each chunk is run (as `run`)")


def _check(args) -> None:
    """Every flag, before the store is opened (issue 58: `run`'s checks for the options the
    two commands share, commands/flag_checks.py)."""
    from fragility_tui.commands.flag_checks import (check_count, check_margin,
                                                    check_run_flags, check_seed)

    check_margin(args.margin)
    check_seed(args.seed, "--seed")
    check_run_flags(args, seed_flag="--grid-seed")
    check_count(args.chunk, "--chunk", 1, CHUNK_MAX, "the store's INTEGER chunk column")
    if args.max_items is not None and args.max_items < 1:
        raise InputError(f"must be at least 1, got {args.max_items}", field="--max-items")
    if args.a == args.b:
        raise InputError(f"A and B name the same model {args.a!r}", field="A B")
    from fragility_tui.commands.compare_live import check_budgets

    check_budgets(args)
    if not args.items:
        for flag in ("--max-seconds", "--max-tokens", "--grid-seed"):
            if getattr(args, flag[2:].replace("-", "_")) is not None:
                raise InputError("goes with --items (a live comparison); a replay's cost "
                                 "is estimated from the runs' recorded seconds", field=flag)


def run(args) -> int:
    import numpy as np

    from fragility_tui.analysis.sequential import run_sequential
    from fragility_tui.bootstrap import open_store
    from fragility_tui.grid.reference import choose_reference

    _check(args)
    store = open_store(args.db)
    if args.items:
        return _run_live(args, store)
    cube = store.load_cube(args.grid)
    unknown = [m for m in (args.a, args.b) if m not in cube.models]
    if unknown:
        raise InputError(f"unknown model(s) {', '.join(unknown)} in grid {args.grid!r}; "
                         f"known: {', '.join(cube.models)}", field="A B")
    cube = choose_reference(cube.pair_configs(args.a, args.b), args.reference)
    ia, ib = cube.models.index(args.a), cube.models.index(args.b)
    available = (cube.present[ia] & cube.present[ib]).all(axis=1)
    d = cube.bits[ia].astype(np.int8) - cube.bits[ib].astype(np.int8)
    d[~available] = 0  # never read: the replay stops before an item without its cells
    result = run_sequential(d, cube.benchmarks, cube.items, cube.configs, cube.reference,
                            seed=args.seed, chunk=args.chunk, margin=args.margin / 100,
                            target=args.target, max_items=args.max_items,
                            available=available, scope=args.scope)
    seconds = _pair_seconds_per_item(store, args.grid, cube, (ia, ib))
    out = result.to_json()
    out.update({
        "grid": args.grid, "a": args.a, "b": args.b, "replay": True,
        "order_items": [cube.items[k] for k in result.order.tolist()],
        "pool_complete": bool(available.all()),
        "configs_in_view": list(cube.configs),
        # the whole pool's exact Δ at the decision config, for the decision's target (a
        # replay knows it; a live run once every item is judged)
        "pool_delta": (pool_delta(d[:, cube.reference_index], cube.benchmarks, args.target)
                       if available.all() else None),
        "seconds_per_item": seconds,
        "seconds_used": None if seconds is None else seconds * result.items_used,
        "seconds_pool": None if seconds is None else seconds * result.pool,
    })
    out["margin_points"] = args.margin
    from fragility_tui.services.comparisons import first_comparison, print_first_line

    first_comparison(store, args.grid, out, live=False)
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2, allow_nan=False) + "\n")
        return 0
    _print_text(out, args)
    print_first_line(out)
    return 0


def _pair_seconds_per_item(store, grid: str, cube, models) -> float | None:
    """Seconds per item of the pair: each model's runs' recorded seconds (runs table
    provenance) over the items it has cells for, summed over the two; None when a model
    has no timed run (an imported or simulated grid)."""
    total = 0.0
    for m in models:
        runs = [r for r in store.runs(grid) if r.model == cube.models[m]]
        seconds = [r.seconds for r in runs if r.seconds is not None]
        items = int(cube.present[m].any(axis=1).sum())
        if not seconds or not items:
            return None
        total += sum(seconds) / items
    return total


def _run_live(args, store) -> int:
    from fragility_tui.commands.compare_live import LiveComparison, RunFailedError

    live = LiveComparison(args, store)
    live.prepare()
    try:
        live.execute()
    except RunFailedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = live.to_json()
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2, allow_nan=False) + "\n")
    else:
        from fragility_tui.services.comparisons import print_first_line

        sys.stdout.write(verdict(out, args) + "\n")
        print_first_line(out)
    return 0


def _print_text(out: dict, args) -> None:
    w = sys.stdout.write
    a = out["alpha_split"]
    w(f"compare {args.a} vs {args.b} on {args.grid} (a replay of recorded cells): reference "
      f"{out['reference']}, {out['target']} target, {out['scope']} scope, "
      f"margin {args.margin:g} points, "
      f"{alpha_words(out['alpha'], a['decision'], out['target'])}, seed {out['seed']}, "
      f"chunk {out['chunk']}, pool {out['pool']} items\n")
    other = other_words(out["target"])
    for s in out["path"]:
        o = s["other_target"]
        state = reading(s, out["margin"])
        line = (f"  {s['items']:>5}/{out['pool']}  Δ̂ {points(s['delta'])}  sequence "
                f"{seq(s['lower'], s['upper'])}  {other} {points(o['delta'])} "
                f"{seq(o['lower'], o['upper'])}  decision: {state}")
        if s["harness_sensitive"]:
            line += reversed_words(s["harness_sensitive"])
        w(line + "\n")
    w(verdict(out, args) + "\n")
