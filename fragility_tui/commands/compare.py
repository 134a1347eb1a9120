"""`fragility-tui compare A B --grid NAME`: the sequential comparison of issue 45 replayed
over cells already in a grid.

Items are taken in the seeded order (stratified by benchmark for the balanced target), chunk
by chunk, as a live run would deliver them; after each chunk the pair's confidence
sequences are updated (analysis/sequential.py) and the comparison stops when settled: a
winner, equivalence within the margin, the budget (--max-items) or the pool's end. The
replay reads recorded cells: driving the live runner chunk by chunk (`--items SRC`) is not
built yet. A grid whose pair lacks cells for an item in the order stops there
('awaiting-cells'): the path up to it is the one a resumed run would follow.
"""

from __future__ import annotations

import json
import sys

from fragility_tui.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("compare", help="a sequential comparison of two models that stops "
                                       "when the answer is settled (replayed over a grid)")
    p.add_argument("a", metavar="A", help="first model (Δ = A - B)")
    p.add_argument("b", metavar="B", help="second model")
    p.add_argument("--grid", required=True, metavar="NAME")
    p.add_argument("--reference", metavar="CONFIG",
                   help="config the decision is made at (default o0.letter when the grid "
                        "has it, else its first config in canonical order)")
    p.add_argument("--target", choices=["observed", "balanced"], default="observed",
                   help="decision target (balanced: every benchmark weighs the same, items "
                        "drawn stratified by benchmark)")
    p.add_argument("--margin", type=float, default=2.0, metavar="POINTS",
                   help="practical margin m in accuracy points (default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the item order (default 0)")
    p.add_argument("--chunk", type=int, default=25, metavar="N",
                   help="items per chunk between decisions (default 25)")
    p.add_argument("--max-items", type=int, default=None, metavar="N",
                   help="budget: stop after this many items (default: the whole pool)")
    p.add_argument("--scope", choices=["population", "pool"], default="population",
                   help="what the sequences cover: the population of items the pool stands "
                        "for (default, as SPEC 9's bootstrap), or the pool's own Δ (exact at "
                        "the pool's end)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _check(args) -> None:
    if args.margin < 0:
        raise InputError(f"must be at least 0, got {args.margin}", field="--margin")
    if args.chunk < 1:
        raise InputError(f"must be at least 1, got {args.chunk}", field="--chunk")
    if args.max_items is not None and args.max_items < 1:
        raise InputError(f"must be at least 1, got {args.max_items}", field="--max-items")
    if args.a == args.b:
        raise InputError(f"A and B name the same model {args.a!r}", field="A B")


def _points(value) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f}"


def _seq(lo, hi) -> str:
    return f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"


def run(args) -> int:
    import numpy as np

    from fragility_tui.analysis.sequential import run_sequential
    from fragility_tui.bootstrap import open_store
    from fragility_tui.grid.reference import choose_reference

    _check(args)
    store = open_store(args.db)
    cube = choose_reference(store.load_cube(args.grid), args.reference)
    unknown = [m for m in (args.a, args.b) if m not in cube.models]
    if unknown:
        raise InputError(f"unknown model(s) {', '.join(unknown)} in grid {args.grid!r}; "
                         f"known: {', '.join(cube.models)}", field="A B")
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
        # the whole pool's exact Δ at the decision config (a replay knows it; a live run not)
        "pool_delta": (float(d[:, cube.reference_index].mean())
                       if available.all() else None),
        "seconds_per_item": seconds,
        "seconds_used": None if seconds is None else seconds * result.items_used,
        "seconds_pool": None if seconds is None else seconds * result.pool,
    })
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2, allow_nan=False) + "\n")
        return 0
    _print_text(out, args)
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


def _print_text(out: dict, args) -> None:
    w = sys.stdout.write
    a = out["alpha_split"]
    w(f"compare {args.a} vs {args.b} on {args.grid} (a replay of recorded cells): reference "
      f"{out['reference']}, {out['target']} target, {out['scope']} scope, "
      f"margin {args.margin:g} points, "
      f"alpha {out['alpha']:g} (decision {a['decision']:g}), seed {out['seed']}, "
      f"chunk {out['chunk']}, pool {out['pool']} items\n")
    other = "balanced" if out["target"] == "observed" else "observed"
    for s in out["path"]:
        o = s["other_target"]
        line = (f"  {s['items']:>5}/{out['pool']}  Δ̂ {_points(s['delta'])}  sequence "
                f"{_seq(s['lower'], s['upper'])}  {other} {_points(o['delta'])} "
                f"{_seq(o['lower'], o['upper'])}")
        if s["harness_sensitive"]:
            line += f"  reversed by {', '.join(s['harness_sensitive'])}"
        w(line + "\n")
    w(_verdict(out, args) + "\n")


def _verdict(out: dict, args) -> str:
    used, pool, stop = out["items_used"], out["pool"], out["stop"]
    last = out["path"][-1] if out["path"] else None
    where = " on this pool" if out["scope"] == "pool" else ""
    saved = f"{used} of {pool} items used, {100 * (1 - used / pool):.0f}% of the pool saved"
    if out["winner"]:
        who = args.a if out["winner"] > 0 else args.b
        text = f"winner {who}" + where
    elif out["settled"] == "equivalent" or stop == "equivalent":
        text = f"equivalent within ±{args.margin:g} points" + where
    else:
        text = "not settled"
    reason = {"winner": "settled", "equivalent": "settled",
              "budget": "the budget (--max-items) is spent",
              "pool-exhausted": "the pool is exhausted",
              "awaiting-cells": "the next chunk's cells are not in the grid yet"}[stop]
    lines = [f"verdict: {text} ({stop}: {reason}); {saved}"]
    if last is not None:
        lines.append(f"  at the stop: Δ̂ {_points(last['delta'])} points, sequence "
                     f"{_seq(last['lower'], last['upper'])}"
                     + (f"; the whole pool's Δ is {_points(out['pool_delta'])}"
                        if out["pool_delta"] is not None else ""))
        if last["harness_sensitive"]:
            lines.append("  harness-sensitive: " + ", ".join(last["harness_sensitive"])
                         + " support the opposite winner (simultaneous sequences)")
    if out["seconds_per_item"] is not None:
        lines.append(f"  cost (estimated from the runs' recorded seconds): "
                     f"{out['seconds_used']:.0f} s against {out['seconds_pool']:.0f} s for "
                     f"the whole pool ({out['seconds_per_item']:.2f} s per item for the pair)")
    return "\n".join(lines)
