"""Issue 45's acceptance simulations for sequential comparisons (not a test).

    PYTHONPATH=. nice -n 10 python benchmarks/sequential_sim.py [--runs 500] \
        [--scope population|pool]     # about 8 minutes each on 2 shared cores

Coverage is of the population's Δ (the expected gap the grids were drawn with) for the
default population scope, of each pool's own Δ for `--scope pool` (and for the generator's
single grid, whose population gap is not defined, in both).

Every run is the procedure of `fragility_tui.analysis.sequential.run_sequential` at its
defaults (observed target, a uniformly random seeded order, chunks of 50 items, margin 2
points, alpha 0.05 of which the decision's sequence gets split_alpha's share: alpha/2 when
sequential_sim.json was written, the whole alpha since issue 58), on a
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

Issue 58 ("settle sooner", `--issue58`): pools as the issue's external check draws them
(3,679 items in four benchmarks of unequal size, SIZES_58; a fresh pair per run whose items
are discordant with probability 15%, 25% or 35% and whose population gap is 0 or 5 points,
the benchmarks differing around those), chunks of 25 (the CLI default), the population and
the pool scope; for each candidate of CANDIDATES_58 (the decision's alpha, the bet, the
grid) on the same pools and orders: the median share of the pool used to settle with its
95% order-statistic interval, the wrong-winner rate (any winner with no difference), the
coverage of the sequence at the stop, every rate with its Wilson interval. The JSON files
(docs/spec.md, "Settle sooner") were written by these invocations, each a few minutes on
2 shared cores (`--append` adds to the file; `--check N` replays N runs through
run_sequential with every config and asserts the shipped candidate's stop and items):

    S="nice -n 10 python benchmarks/sequential_sim.py --issue58 --runs 500"  # PYTHONPATH=.
    B=benchmarks/sequential_sim_issue58_bets.json
    for d in 15 25 35; do
      c=$([ $d = 15 ] && echo 4 || echo 0)   # 4 checked runs (population), 2 (pool)
      $S --discordance $d --append --check $c \
         --candidates "alpha/2 growth (old),alpha growth zoom prior"
      $S --discordance $d --append --check 0 \
         --candidates "alpha/2 growth zoom prior,0.8alpha growth zoom prior"
      $S --discordance $d --append --check $((c / 2)) --scope pool \
         --candidates "alpha/2 growth (old),alpha growth zoom prior"
      $S --discordance $d --append --check 0 --out $B \
         --candidates "alpha growth,alpha growth zoom,alpha ons"
      $S --discordance $d --append --check 0 --out $B --candidates "alpha/2 hedged,alpha hedged"
      $S --discordance $d --append --check 0 --out $B --candidates "alpha mixture"
    done
    $S --discordance 25 --gaps 10,20 --append --check 0 --out $B \
       --candidates "alpha/2 growth (old),alpha growth zoom,alpha growth zoom prior"
    for d in 15 25 35; do
      $S --discordance $d --append --check 0 --out $B --candidates "alpha mixture zoom"
    done

Issue 45's scenarios above with issue 58's sequences: `--runs 500 --out
benchmarks/sequential_sim_after58.json` and `--runs 500 --scope pool --out
benchmarks/sequential_sim_after58_pool.json` (sequential_sim.json and
sequential_sim_pool.json are the sequences before issue 58).
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


# --- issue 58: settle sooner ------------------------------------------------------------
# Pools as the issue's external check draws them: 3,679 items in four benchmarks of unequal
# size, a fresh pair per run, discordance (the share of items the two models disagree on)
# 15%, 25% or 35%, a population gap of 0 or 5 points, chunks of 25 (the CLI default).
SIZES_58 = {"mmlu": 1531, "hellaswag": 1104, "arc_challenge": 665, "truthfulqa": 379}
# the benchmarks differ: their discordance and gap are these multiples of the pool's
# (renormalised so that the pool-weighted means are the scenario's)
DISC_SHAPE_58 = np.array([1.2, 0.8, 1.0, 0.9])
GAP_SHAPE_58 = np.array([1.3, 0.6, 1.0, 0.8])
CHUNK_58 = 25
# (name, the decision's alpha as a share of alpha, bet, candidate grid points, zoom points
# near Δ = 0, the growth bet's prior draws); zoom 0 and prior 0 are the sequences before
# issue 58
_G = betting_cs.GRID_POINTS
_Z = betting_cs.ZOOM_POINTS
_P = betting_cs.PRIOR_DRAWS
SHIPPED_58 = "alpha growth zoom prior"  # the sequences run_sequential builds since issue 58
CANDIDATES_58 = (
    ("alpha/2 growth (old)", 0.5, "growth", _G, 0, 0),
    ("alpha/2 hedged", 0.5, "hedged", _G, 0, 0),
    ("3alpha/4 growth", 0.75, "growth", _G, 0, 0),
    ("alpha growth", 1.0, "growth", _G, 0, 0),
    ("alpha hedged", 1.0, "hedged", _G, 0, 0),
    ("alpha ons", 1.0, "ons", _G, 0, 0),
    ("alpha mixture", 1.0, "mixture", _G, 0, 0),
    ("alpha growth grid-3201", 1.0, "growth", 3201, 0, 0),
    ("alpha growth zoom", 1.0, "growth", _G, _Z, 0),
    ("alpha/2 growth zoom prior", 0.5, "growth", _G, _Z, _P),
    ("3alpha/4 growth zoom prior", 0.75, "growth", _G, _Z, _P),
    ("0.8alpha growth zoom prior", 0.8, "growth", _G, _Z, _P),
    ("0.9alpha growth zoom prior", 0.9, "growth", _G, _Z, _P),
    ("alpha growth zoom prior", 1.0, "growth", _G, _Z, _P),
    ("alpha growth zoom prior60", 1.0, "growth", _G, _Z, 60),
    ("alpha ons zoom", 1.0, "ons", _G, _Z, 0),
    ("alpha mixture zoom", 1.0, "mixture", _G, _Z, 0),
)


def trinomial_pools(rng, runs: int, disc: float, gap: float, sizes=None):
    """d [runs, N] of a fresh pair per run: each item of benchmark b is discordant with
    probability q_b and then A's (d = +1) with probability (1 + g_b / q_b) / 2; q_b, g_b
    are the scenario's discordance and gap shaped by DISC_SHAPE_58 / GAP_SHAPE_58. The
    population's Δ (observed target) is `gap`. In the population scope only the law of d
    matters (the pool's items in a uniformly random order are i.i.d. draws from it), so
    the latent structure of a real pair (shared difficulty, harness effects) is not needed
    here; it is in the exchangeable-model scenarios above."""
    sizes = sizes or SIZES_58
    n_b = np.array(list(sizes.values()))
    w = n_b / n_b.sum()
    q = disc * DISC_SHAPE_58 / np.dot(w, DISC_SHAPE_58)
    g = gap * GAP_SHAPE_58 / np.dot(w, GAP_SHAPE_58)
    if np.any(np.abs(g) > q) or np.any(q > 1):
        raise ValueError("the gap does not fit the discordance")
    parts = []
    for qb, gb, nb in zip(q, g, n_b):
        u = rng.random((runs, nb))
        parts.append(np.where(u < (qb + gb) / 2, 1, np.where(u < qb, -1, 0)).astype(np.int8))
    bench = np.concatenate([np.full(nb, b, dtype=object) for b, nb in sizes.items()])
    return np.concatenate(parts, axis=1), bench


def run_decision(d_ref, orders, truth, *, alpha: float, bet: str, chunk: int, scope: str,
                 points: int = betting_cs.GRID_POINTS, zoom: int | None = None,
                 prior: float | None = None, margin: float = MARGIN) -> dict:
    """The decision's sequence of `run_sequential` for R runs at once (the stopping rule
    reads it alone): d_ref [R, I], orders [R, I], truth [R] the Δ it should cover; `alpha`
    is the decision sequence's own level. Verdicts vectorised over runs."""
    n_runs, n = d_ref.shape
    cs = WorBettingCS(np.full(n_runs, n), alpha, points=points, finite=scope == "pool",
                      bet=bet, zoom=zoom, prior=prior)
    x = (np.take_along_axis(d_ref, orders, axis=1) + 1) / 2.0
    active = np.ones(n_runs, dtype=bool)
    used = np.full(n_runs, n)
    winner = np.zeros(n_runs, dtype=np.int8)
    covered = np.ones(n_runs, dtype=bool)
    stop = np.array(["pool-exhausted"] * n_runs, dtype=object)
    width = np.zeros(n_runs)
    tol = 1e-9
    for t in range(n):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        cs.update(rows, x[rows, t])
        if (t + 1) % chunk and t + 1 < n:
            continue
        lo_x, hi_x = cs.bounds()
        delta = 2 * cs.s[rows] / cs.n[rows] - 1
        lo, hi = 2 * lo_x[rows] - 1, 2 * hi_x[rows] - 1
        win = ((lo > tol) & (delta >= margin - tol)) | ((hi < -tol) & (delta <= -margin + tol))
        equiv = ~win & (lo >= -margin - tol) & (hi <= margin + tol)
        end = (win | equiv) if t + 1 < n else np.ones(rows.size, dtype=bool)
        r = rows[end]
        active[r] = False
        used[r] = t + 1
        stop[r] = (np.where(win[end], "winner", "equivalent") if t + 1 < n
                   else "pool-exhausted")
        winner[r] = np.where(win[end], np.where(delta[end] > 0, 1, -1), 0)
        covered[r] = (lo[end] - 1e-12 <= truth[r]) & (truth[r] <= hi[end] + 1e-12)
        width[r] = hi[end] - lo[end]
    return {"used": used, "winner": winner, "covered": covered, "stop": stop,
            "width": width}


def median_interval(values: np.ndarray) -> tuple[float, float, float]:
    """The median and its distribution-free 95% interval (order statistics at the
    binomial(n, 1/2) quantiles)."""
    from scipy.stats import binom

    v = np.sort(np.asarray(values, dtype=float))
    n = len(v)
    k_lo = max(int(binom.ppf(0.025, n, 0.5)) - 1, 0)
    k_hi = min(int(binom.ppf(0.975, n, 0.5)), n - 1)
    return float(np.median(v)), float(v[k_lo]), float(v[k_hi])


def issue58_suite(runs: int, seed: int, scope: str, candidates, discs, gaps) -> list:
    """Every (discordance, gap) scenario, the same pools and orders for every candidate."""
    from fragility_tui.harness.configs import CONFIG_IDS as _configs  # noqa: F401

    out = []
    for disc in discs:
        for gap in gaps:
            rng = np.random.default_rng([58, seed, int(round(disc * 100)),
                                         int(round(gap * 100))])
            d, bench = trinomial_pools(rng, runs, disc, gap)
            n = d.shape[1]
            ids = [f"{b}/{k}" for k, b in enumerate(bench)]
            orders = np.stack([item_order(bench, ids, s, stratified=False)
                               for s in range(runs)])
            pool_delta = d.mean(axis=1)
            truth = pool_delta if scope == "pool" else np.full(runs, gap)
            for name, share, bet, points, zoom, prior in candidates:
                t0 = time.time()
                res = run_decision(d, orders, truth, alpha=ALPHA * share, bet=bet,
                                   chunk=CHUNK_58, scope=scope, points=points, zoom=zoom,
                                   prior=prior)
                share_used = res["used"] / n
                med, lo, hi = median_interval(share_used)
                wins = res["winner"]
                row = {"scope": scope, "discordance": disc, "gap": gap, "candidate": name,
                       "decision_alpha": ALPHA * share, "bet": bet, "points": points,
                       "zoom_points": zoom, "prior_draws": prior,
                       "runs": runs, "pool": n,
                       "discordance_observed": float(np.mean(d != 0)),
                       "pool_delta_mean": float(pool_delta.mean()),
                       "share_of_pool_median": med, "share_of_pool_median_ci": [lo, hi],
                       "share_of_pool_mean": float(share_used.mean()),
                       "share_of_pool_quartiles": [float(np.quantile(share_used, 0.25)),
                                                   float(np.quantile(share_used, 0.75))],
                       "winner_declared": rate(int(np.sum(wins != 0)), runs),
                       "wrong_winner": rate(int(np.sum(wins < 0 if gap > 0 else wins != 0)),
                                            runs),
                       "right_winner": rate(int(np.sum(wins > 0)), runs) if gap else None,
                       # a finite pool has a Δ of its own: winners against its sign, and on
                       # pools whose own |Δ| is below the margin
                       "winner_against_pool_sign": int(np.sum((wins != 0) & (
                           wins != np.sign(np.round(pool_delta * n))))),
                       "winner_on_pool_below_margin": int(np.sum(
                           (wins != 0) & (np.abs(pool_delta) < MARGIN - 1e-9))),
                       "coverage_at_stop": rate(int(res["covered"].sum()), runs),
                       "width_at_stop_median": float(np.median(res["width"])),
                       "stops": {s: int(np.sum(res["stop"] == s))
                                 for s in sorted(set(res["stop"].tolist()))},
                       "seconds": round(time.time() - t0, 1)}
                print(json.dumps({k: row[k] for k in (
                    "scope", "discordance", "gap", "candidate", "share_of_pool_median",
                    "share_of_pool_median_ci", "seconds")}
                    | {"winners": row["winner_declared"]["count"],
                       "wrong": row["wrong_winner"]["count"],
                       "coverage": row["coverage_at_stop"]["rate"]}), flush=True)
                out.append(row)
    return out


def check_issue58(n_check: int, seed: int) -> int:
    """The vectorised decision of the shipped candidate and run_sequential itself (every
    config, both targets, chunks of 25) agree on the stop and the items used."""
    from fragility_tui.harness.configs import CONFIG_IDS as configs

    shipped = [c for c in CANDIDATES_58 if c[0] == SHIPPED_58][0]
    _, share, bet, points, zoom, prior = shipped
    rng = np.random.default_rng([59, seed])
    for k in range(n_check):
        cols = [trinomial_pools(rng, 1, 0.25, 0.05 if k % 2 else 0.0)[0][0]
                for _ in configs]
        d, bench = np.stack(cols, axis=1), trinomial_pools(rng, 1, 0.25, 0.0)[1]
        ids = [f"{b}/{i}" for i, b in enumerate(bench)]
        full = run_sequential(d, bench, ids, configs, configs[0], seed=k, chunk=CHUNK_58,
                              margin=MARGIN, alpha=ALPHA, scope=SCOPE)
        assert abs(full.alphas["decision"] - ALPHA * share) < 1e-12, full.alphas
        batch = run_decision(d[None, :, 0], full.order[None, :], np.zeros(1),
                             alpha=ALPHA * share, bet=bet, chunk=CHUNK_58, scope=SCOPE,
                             points=points, zoom=zoom, prior=prior)
        assert (full.items_used, full.stop) == (int(batch["used"][0]), batch["stop"][0]), k
    return n_check


def main_issue58(args) -> None:
    global SCOPE
    SCOPE = args.scope
    names = args.candidates.split(",") if args.candidates else None
    cands = [c for c in CANDIDATES_58 if names is None or c[0] in names]
    if names and len(cands) != len(names):
        raise SystemExit(f"unknown candidate among {names}; known: "
                         f"{[c[0] for c in CANDIDATES_58]}")
    discs = [float(v) / 100 for v in args.discordance.split(",")]
    gaps = [float(v) / 100 for v in args.gaps.split(",")]
    out = args.out or ("benchmarks/sequential_sim_issue58.json" if args.scope == "population"
                       else "benchmarks/sequential_sim_issue58_pool.json")
    t0 = time.time()
    results = {"scope": args.scope, "pool_sizes": SIZES_58,
               "disc_shape": DISC_SHAPE_58.tolist(), "gap_shape": GAP_SHAPE_58.tolist(),
               "shipped": SHIPPED_58,
               "method": f"the decision's sequence of run_sequential: observed target, "
                         f"uniform seeded order, chunk {CHUNK_58}, margin {MARGIN}, "
                         f"alpha {ALPHA}; each candidate gives the decision its own level "
                         f"and bet, on the same pools and orders per scenario",
               "checked_against_run_sequential": check_issue58(args.check, args.seed),
               "invocations": [], "scenarios": []}
    if args.append:
        try:
            with open(out) as fh:
                old = json.load(fh)
            results["invocations"] = old.get("invocations", [])
            results["checked_against_run_sequential"] += old.get(
                "checked_against_run_sequential", 0)
            results["scenarios"] = old.get("scenarios", [])
        except FileNotFoundError:
            pass
    rows = issue58_suite(args.runs, args.seed, args.scope, cands, discs, gaps)
    fresh = {(r["discordance"], r["gap"], r["candidate"]) for r in rows}
    results["scenarios"] = [r for r in results["scenarios"]
                            if (r["discordance"], r["gap"], r["candidate"]) not in fresh] + rows
    results["invocations"].append({"runs": args.runs, "seed": args.seed,
                                   "discordance": discs, "gaps": gaps,
                                   "candidates": [c[0] for c in cands],
                                   "seconds": round(time.time() - t0, 1)})
    with open(out, "w") as fh:
        json.dump(results, fh, indent=2)
    print(f"wrote {out} in {round(time.time() - t0, 1)} s")


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
    ap.add_argument("--issue58", action="store_true",
                    help="issue 58's scenarios instead (four unequal benchmarks, discordance "
                         "and gap as --discordance / --gaps, chunks of 25, every candidate "
                         "of CANDIDATES_58 or --candidates); default out "
                         "benchmarks/sequential_sim_issue58[_pool].json")
    ap.add_argument("--discordance", default="15,25,35", help="with --issue58: percent")
    ap.add_argument("--gaps", default="0,5", help="with --issue58: points")
    ap.add_argument("--candidates", default=None,
                    help="with --issue58: comma-separated names from CANDIDATES_58")
    ap.add_argument("--append", action="store_true",
                    help="with --issue58: add to the JSON already at --out (a scenario and "
                         "candidate measured again replaces its row)")
    args = ap.parse_args()
    if args.issue58:
        main_issue58(args)
        return
    global SCOPE
    SCOPE = args.scope
    betting_cs.BET = args.bet  # every sequence built below, run_sequential's too
    args.out = args.out or ("benchmarks/sequential_sim.json" if SCOPE == "population"
                            else "benchmarks/sequential_sim_pool.json")
    t0 = time.time()
    results = {"scope": SCOPE, "bet": args.bet, "latent_sd": LATENT_SD,
               "method": "run_sequential defaults: observed target, uniform seeded order, "
                         f"chunk {CHUNK}, margin {MARGIN}, alpha {ALPHA} (decision alpha "
                         f"{split_alpha(ALPHA, len(CONFIG_IDS) - 1)['decision']:g})",
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
