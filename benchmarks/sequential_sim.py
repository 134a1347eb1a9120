"""Issue 45's acceptance simulations for sequential comparisons (not a test).

    PYTHONPATH=. nice -n 10 python benchmarks/sequential_sim.py [--runs 500] \
        [--scope population|pool]     # about 8 minutes each on 2 shared cores

Coverage is of the population's Δ (the expected gap the grids were drawn with) for the
default population scope, of each pool's own Δ for `--scope pool` (and for the generator's
single grid, whose population gap is not defined, in both).

Every run is the procedure of `fragility_tui.analysis.sequential.run_sequential` at its
defaults (observed target, a uniformly random seeded order, chunks of 50 items, margin 2
points, alpha 0.05 of which the decision's sequence gets alpha/2 by the union bound), on a
pool of 3,679 items split as the reference study's (1000/1000/1000/679). The stopping rule
reads only the decision's sequence (the reference config under the lead target), so the
runs here carry that sequence alone, vectorised over runs; `--check N` replays N of them
through `run_sequential` itself (all 26 configs and both targets) and asserts the same stop
and items used.

Scenarios (the truth of a run is its own pool's Δ at the reference, which the sequence
targets):
- null-exchangeable: two models drawn alike on a fresh grid per run (item difficulty,
  harness effects shared by both models in every config, a per-(model, item) latent, noise):
  no difference in expectation. Optional stopping at every chunk. Reported: winners declared
  (any stop), coverage of the pool's Δ by the sequence at the stopping time, items used.
- gap-5 / gap-2: the same grids with model A's ability shifted so that the expected gap at
  the reference is 5 (2) points. Reported: median items used (share of the pool), the
  winner rate (power) with its Wilson interval, coverage at the stop.
- generator-gap-5 / generator-gap-2: the project's generator (grid.simulate, seed 0,
  12 models x 3,679 items): the pair whose reference Δ is nearest 5 (2) points, one grid,
  the runs differing only in their seeded order.
"""

from __future__ import annotations

import os

if __name__ == "__main__":
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy.stats import norm  # noqa: E402

from fragility_tui.analysis import betting_cs  # noqa: E402
from fragility_tui.analysis.binomial import rate  # noqa: E402
from fragility_tui.analysis.sequential import (WorBettingCS, item_order,  # noqa: E402
                                               run_sequential, settled, split_alpha)
from fragility_tui.harness.configs import CONFIG_IDS  # noqa: E402

SIZES = {"arc_challenge": 1000, "hellaswag": 1000, "mmlu": 1000, "truthfulqa": 679}
MARGIN, ALPHA, CHUNK = 0.02, 0.05, 50
LATENT_SD = 1.0


def _bench_ids():
    bench = np.concatenate([np.full(n, b, dtype=object) for b, n in SIZES.items()])
    return bench, [f"{b}/{k}" for k, b in enumerate(bench)]


def _shift_for(gap: float) -> float:
    """Ability shift of model A giving an expected reference gap `gap` (the latent sum of
    item, harness, latent and noise is normal with sd sqrt(1 + 0.64 + latent^2 + 1))."""
    sd = np.sqrt(1.0 + 0.64 + LATENT_SD ** 2 + 1.0)
    base = norm.cdf(0.3 / sd)
    lo, hi = 0.0, 3.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if norm.cdf((0.3 + mid) / sd) - base < gap else (lo, mid)
    return (lo + hi) / 2


def exchangeable_pair(rng, gap: float, n_configs: int = 1):
    """d [I, n_configs] of a fresh pair: shared item and harness effects, own latent and
    noise, model A shifted by the ability giving an expected reference gap `gap`."""
    n = sum(SIZES.values())
    item = rng.normal(0.3, 1.0, (n, 1))
    harness = rng.normal(0.0, 0.8, (n, n_configs))
    a = item + harness + rng.normal(0, LATENT_SD, (n, 1)) + rng.normal(0, 1, (n, n_configs))
    b = item + harness + rng.normal(0, LATENT_SD, (n, 1)) + rng.normal(0, 1, (n, n_configs))
    shift = _shift_for(gap) if gap else 0.0
    return (a + shift > 0).astype(np.int8) - (b > 0).astype(np.int8)


SCOPE = "population"


def run_batch(d_ref: np.ndarray, orders: np.ndarray, truth=None) -> dict:
    """The decision's sequence for R runs at once: d_ref [R, I], orders [R, I]; the truth
    it should cover is the population's Δ (given) or, for the pool scope, the pool's."""
    n_runs, n = d_ref.shape
    alpha = split_alpha(ALPHA, len(CONFIG_IDS) - 1)["decision"]
    cs = WorBettingCS(np.full(n_runs, n), alpha, finite=SCOPE == "pool")
    x = (np.take_along_axis(d_ref, orders, axis=1) + 1) / 2.0
    pool_delta = d_ref.mean(axis=1)
    truth = pool_delta if truth is None or SCOPE == "pool" else np.broadcast_to(truth, n_runs)
    active = np.ones(n_runs, dtype=bool)
    used = np.full(n_runs, n)
    winner = np.zeros(n_runs, dtype=np.int8)
    covered = np.ones(n_runs, dtype=bool)
    stop = np.array(["pool-exhausted"] * n_runs, dtype=object)
    for t in range(n):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        cs.update(rows, x[rows, t])
        if (t + 1) % CHUNK and t + 1 < n:
            continue
        lo_x, hi_x = cs.bounds()
        for r in rows.tolist():
            delta = 2 * cs.s[r] / cs.n[r] - 1
            lo, hi = 2 * lo_x[r] - 1, 2 * hi_x[r] - 1
            verdict = settled(delta, lo, hi, MARGIN)
            if verdict is None and t + 1 < n:
                continue
            active[r] = False
            used[r] = t + 1
            stop[r] = verdict if t + 1 < n else "pool-exhausted"
            winner[r] = (1 if delta > 0 else -1) if verdict == "winner" else 0
            covered[r] = lo - 1e-12 <= truth[r] <= hi + 1e-12
    return {"used": used, "winner": winner, "covered": covered, "stop": stop,
            "truth": pool_delta}


def summarise(name: str, res: dict, n: int, expected_winner: int) -> dict:
    runs = len(res["used"])
    share = res["used"] / n
    stops = {s: int(np.sum(res["stop"] == s)) for s in sorted(set(res["stop"].tolist()))}
    out = {"scenario": name, "runs": runs, "pool": n,
           "pool_delta_mean": float(res["truth"].mean()),
           "pool_delta_sd": float(res["truth"].std()),
           "winner_declared": rate(int(np.sum(res["winner"] != 0)), runs),
           "right_winner": rate(int(np.sum(res["winner"] == expected_winner)), runs)
           if expected_winner else None,
           "coverage_at_stop": rate(int(res["covered"].sum()), runs),
           # a finite pool has a Δ of its own: how many pools reach the margin, and how many
           # winners were declared on a pool whose own |Δ| is below it (wrong about the pool)
           "pools_beyond_margin": int(np.sum(np.abs(res["truth"]) >= MARGIN - 1e-9)),
           "winner_on_pool_below_margin": int(np.sum((res["winner"] != 0)
                                                     & (np.abs(res["truth"]) < MARGIN - 1e-9))),
           "items_used_median": float(np.median(res["used"])),
           "share_of_pool_median": float(np.median(share)),
           "share_of_pool_quartiles": [float(np.quantile(share, 0.25)),
                                       float(np.quantile(share, 0.75))],
           "stops": stops}
    print(json.dumps(out), flush=True)
    return out


def exchangeable_scenario(name, gap, runs, seed):
    rng = np.random.default_rng([45, seed])
    bench, ids = _bench_ids()
    d = np.stack([exchangeable_pair(rng, gap)[:, 0] for _ in range(runs)])
    orders = np.stack([item_order(bench, ids, s, stratified=False) for s in range(runs)])
    return summarise(name, run_batch(d, orders, truth=gap), d.shape[1], 1 if gap else 0)


def generator_scenario(name, gap, runs):
    from fragility_tui.grid.simulate import simulate_cube

    cube = simulate_cube(12, sum(SIZES.values()), 0)
    ref = cube.reference_index
    acc = cube.bits[:, :, ref].mean(axis=1)
    pairs = [(abs(acc[a] - acc[b] - gap), a, b) for a in range(12) for b in range(12) if a != b
             and acc[a] > acc[b]]
    _, a, b = min(pairs)
    d = (cube.bits[a, :, ref].astype(np.int8) - cube.bits[b, :, ref].astype(np.int8))
    orders = np.stack([item_order(cube.benchmarks, cube.items, s, stratified=False)
                       for s in range(runs)])
    out = summarise(name, run_batch(np.tile(d, (runs, 1)), orders), len(d), 1)
    out["pair"] = [cube.models[a], cube.models[b]]
    return out


def check_against_procedure(n_check: int, seed: int) -> int:
    """The vectorised batch and run_sequential (every config, both targets) agree."""
    rng = np.random.default_rng([46, seed])
    bench, ids = _bench_ids()
    for k in range(n_check):
        d = exchangeable_pair(rng, 0.05 if k % 2 else 0.0, len(CONFIG_IDS))
        full = run_sequential(d, bench, ids, CONFIG_IDS, CONFIG_IDS[0], seed=k, chunk=CHUNK,
                              margin=MARGIN, alpha=ALPHA, scope=SCOPE)
        batch = run_batch(d[None, :, 0], full.order[None, :])
        assert (full.items_used, full.stop) == (int(batch["used"][0]), batch["stop"][0]), k
    return n_check


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", type=int, default=4)
    ap.add_argument("--scope", choices=["population", "pool"], default="population")
    ap.add_argument("--bet", choices=betting_cs.BETS, default=betting_cs.BET,
                    help="the sequences' bets (default the shipped one)")
    ap.add_argument("--out", default=None,
                    help="default benchmarks/sequential_sim.json (sequential_sim_pool.json "
                         "for --scope pool)")
    args = ap.parse_args()
    global SCOPE
    SCOPE = args.scope
    betting_cs.BET = args.bet  # every sequence built below, run_sequential's too
    args.out = args.out or ("benchmarks/sequential_sim.json" if SCOPE == "population"
                            else "benchmarks/sequential_sim_pool.json")
    t0 = time.time()
    results = {"scope": SCOPE, "bet": args.bet, "latent_sd": LATENT_SD,
               "method": "run_sequential defaults: observed target, uniform seeded order, "
                         f"chunk {CHUNK}, margin {MARGIN}, alpha {ALPHA} (decision alpha/2)",
               "checked_against_run_sequential": check_against_procedure(args.check,
                                                                         args.seed),
               "scenarios": []}
    for name, gap in (("null-exchangeable", 0.0), ("gap-5", 0.05), ("gap-2", 0.02)):
        results["scenarios"].append(exchangeable_scenario(name, gap, args.runs, args.seed))
    for name, gap in (("generator-gap-5", 0.05), ("generator-gap-2", 0.02)):
        results["scenarios"].append(generator_scenario(name, gap, args.runs))
    results["seconds"] = round(time.time() - t0, 1)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=2)
    print(f"wrote {args.out} in {results['seconds']} s")


if __name__ == "__main__":
    main()
