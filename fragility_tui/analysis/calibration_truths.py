"""The truths the verdict calibration simulates besides the observed grid
(analysis/calibration.py), and its family-level check over all adjacent pairs.

A truth with a chosen reference gap and each model's own harness effects. For a pair (A, B)
the calibration needs grids where the reference gap is zero (the "no gap, harness kept"
null) or exactly the margin m ("power at m"), while everything else about the two models
stays what the grid shows. Construction (`shifted_truth`), per benchmark b, on the pair's
two rows of the observed cube:
  d_b = (observed reference gap A − B over paired items) − (target gap in items),
  target = 0 for the null, round(m/100 × paired items of b) in the observed direction for
  power at m;
  then |d_b| whole complete rows are turned over: to lower the gap, a robust-correct row of
  A becomes robust-wrong (every config of A loses exactly one correct item) or a
  robust-wrong row of B becomes robust-correct (every config of B gains one); to raise it,
  the mirror image. Candidate rows: those where the other model has the reference cell
  (each turn moves the paired gap by exactly one item). They are taken in a seeded random
  order, first one row per item of the pair's stable disagreements on the ahead side (A
  robust-correct, B robust-wrong when lowering: turning either row also moves the stable
  set towards no gap, as a no-gap truth should), then any other candidate row.
Why whole robust rows: a robust row holds the same bit in every config, so turning it moves
every config's count of that model by exactly one item, and each model keeps its
config-to-config pattern exactly (accuracy under c minus accuracy under the reference,
per benchmark): the harness effects of both models, and hence the pair's per-config gaps
relative to its reference gap, are the grid's own; only the level moves. Turning single
cells instead would also keep the per-config rates but manufacture fragile rows (a
robust-correct row with one cell flipped is fragile), changing the very classes the
verdicts read. Items keep their joint behaviour except on the turned rows, and presence is
untouched. When a benchmark has fewer candidate rows than |d_b| (a tiny grid, or models
with almost no robust rows), every candidate is turned and the shortfall is reported
(`shortfall_items`), so the scenario's true gap is stated, never assumed.

The family check (`family_exceedance`): under the exchangeable null (each benchmark's
items redrawn with replacement, the same draw for every model; on every drawn item a fair
coin per pair exchanges the pair's two rows), how often the largest |reference gap| over
the family of pairs, in points over paired items, reaches the largest observed one — and,
per pair, its own observed |gap| (a max-statistic adjustment over the family, as
Westfall–Young's). Pure numpy."""

from __future__ import annotations

import numpy as np

from fragility_tui.analysis.classify import ROBUST_CORRECT, ROBUST_WRONG, classify
from fragility_tui.analysis.decisions import strata_of
from fragility_tui.grid.cube import Cube


def pair_cube(cube: Cube, i: int, j: int) -> Cube:
    """Models i and j of a canonical cube as a two-model cube (0 = i, 1 = j)."""
    keep = [i, j]
    return Cube((cube.models[i], cube.models[j]), cube.items, cube.configs,
                np.array(cube.bits[keep]), np.array(cube.present[keep]), cube.benchmarks,
                None, cube.reference)


def reference_gaps(pair: Cube) -> tuple[np.ndarray, np.ndarray]:
    """Per benchmark: the reference gap (0 − 1) in items and the paired items, [S] each."""
    ref = pair.reference_index
    paired = pair.present[0, :, ref] & pair.present[1, :, ref]
    diff = (pair.bits[0, :, ref].astype(np.int64) - pair.bits[1, :, ref]) * paired
    strata = strata_of(pair)
    gaps = np.array([diff[lo:hi].sum() for lo, hi in zip(strata.starts, strata.stops)])
    n = np.array([paired[lo:hi].sum() for lo, hi in zip(strata.starts, strata.stops)])
    return gaps.astype(np.int64), n.astype(np.int64)


def margin_targets(pair: Cube, margin_points: float) -> np.ndarray:
    """Per benchmark, a gap of the margin in items (rounded), in the observed direction
    (model 0 ahead when the observed gap is zero), so both targets see a gap of about m."""
    gaps, n = reference_gaps(pair)
    direction = -1 if gaps.sum() < 0 else 1
    return direction * np.rint(margin_points / 100.0 * n).astype(np.int64)


def shifted_truth(pair: Cube, targets: np.ndarray, rng: np.random.Generator):
    """(cube, shortfall): the pair with whole robust rows turned so that benchmark b's
    reference gap is targets[b] items (module docstring); shortfall = items by which the
    gaps could not be moved, summed over benchmarks (0 when every target is met)."""
    codes = classify(pair).codes
    ref = pair.reference_index
    bits = np.array(pair.bits)
    gaps, _ = reference_gaps(pair)
    strata = strata_of(pair)
    shortfall = 0
    for s, (lo, hi) in enumerate(zip(strata.starts.tolist(), strata.stops.tolist())):
        d = int(gaps[s] - targets[s])
        if d == 0:
            continue
        # lowering the gap: A right -> wrong, or B wrong -> right; raising: the mirror image
        turn = ((0, ROBUST_CORRECT, False), (1, ROBUST_WRONG, True)) if d > 0 else \
               ((0, ROBUST_WRONG, True), (1, ROBUST_CORRECT, False))
        # first the rows of the pair's stable disagreements on the ahead side (turning one
        # moves the stable set towards no gap too), then any other candidate row
        favoured = ((codes[0, lo:hi] == ROBUST_CORRECT) & (codes[1, lo:hi] == ROBUST_WRONG)
                    if d > 0 else
                    (codes[0, lo:hi] == ROBUST_WRONG) & (codes[1, lo:hi] == ROBUST_CORRECT))
        tiers = ([], [])
        for model, code, new_bit in turn:
            other_present = pair.present[1 - model, lo:hi, ref]
            ok = (codes[model, lo:hi] == code) & other_present
            for tier, rows in ((0, np.flatnonzero(ok & favoured)),
                               (1, np.flatnonzero(ok & ~favoured))):
                tiers[tier].extend((model, int(r) + lo, new_bit) for r in rows)
        # a favoured item offers two rows (either model's): one turn per item is enough
        order = list(rng.permutation(len(tiers[0])))
        seen, first = set(), []
        for k in order:
            if tiers[0][k][1] not in seen:
                seen.add(tiers[0][k][1])
                first.append(tiers[0][k])
        rest = [tiers[1][k] for k in rng.permutation(len(tiers[1]))]
        candidates = first + rest + [c for c in tiers[0] if c not in first]
        k = min(abs(d), len(candidates))
        shortfall += abs(d) - k
        for model, row, new_bit in candidates[:k]:
            bits[model, row] = new_bit & pair.present[model, row]
    return Cube(pair.models, pair.items, pair.configs, bits, pair.present, pair.benchmarks,
                None, pair.reference), int(shortfall)


def truth_gap_points(pair: Cube) -> float | None:
    """The truth's reference gap (0 − 1) in points over paired items (observed target)."""
    gaps, n = reference_gaps(pair)
    return float(100.0 * gaps.sum() / n.sum()) if n.sum() else None


def family_exceedance(cube: Cube, pairs_idx, replicates: int, rng: np.random.Generator):
    """(observed |gap| points [P], null max over the family [R]) under the exchangeable
    null (module docstring); cube canonical, pairs_idx [(i, j)]."""
    ref = cube.reference_index
    strata = strata_of(cube)
    idx = np.empty((replicates, len(cube.items)), dtype=np.intp)
    for lo, hi in zip(strata.starts.tolist(), strata.stops.tolist()):
        idx[:, lo:hi] = rng.integers(lo, hi, size=(replicates, hi - lo))
    observed = np.zeros(len(pairs_idx))
    null_max = np.zeros(replicates)
    for p, (i, j) in enumerate(pairs_idx):
        paired = cube.present[i, :, ref] & cube.present[j, :, ref]
        diff = (cube.bits[i, :, ref].astype(np.int64) - cube.bits[j, :, ref]) * paired
        observed[p] = 100.0 * abs(diff.sum()) / paired.sum() if paired.any() else 0.0
        coin = np.where(rng.random(idx.shape) < 0.5, -1, 1)
        n = paired[idx].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            sim = np.where(n > 0, 100.0 * np.abs((diff[idx] * coin).sum(axis=1)) / n, 0.0)
        null_max = np.maximum(null_max, sim)
    return observed, null_max


def config_gaps_points(pair: Cube) -> dict[str, np.ndarray]:
    """The truth's gap (0 − 1) in points under every config [C], per target: `observed`
    over the paired items, `balanced` the mean of the benchmarks' gaps (those with paired
    items); nan where a config has no paired item."""
    paired = pair.present[0] & pair.present[1]  # [I, C]
    diff = (pair.bits[0].astype(np.int64) - pair.bits[1]) * paired
    strata = strata_of(pair)
    num = np.array([diff[lo:hi].sum(axis=0) for lo, hi in zip(strata.starts, strata.stops)])
    den = np.array([paired[lo:hi].sum(axis=0) for lo, hi in zip(strata.starts, strata.stops)])
    has = den > 0
    per_bench = np.where(has, 100.0 * num / np.maximum(den, 1), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = 100.0 * num.sum(axis=0) / den.sum(axis=0)
        balanced = per_bench.sum(axis=0) / has.sum(axis=0)
    return {"observed": observed, "balanced": balanced}


def harness_reversal(pair: Cube, margin_points: float) -> dict[str, bool]:
    """Per target: whether the truth itself makes the winner depend on the harness, so that
    `harness-sensitive` is a correct outcome, not a false alarm: some other config's true
    gap is at least the margin and has the opposite sign to the reference's (either sign
    when the reference gap is 0). 1e-9 tolerance: gaps are ratios of counts."""
    ref = pair.reference_index
    out = {}
    for target, gaps in config_gaps_points(pair).items():
        g_ref = gaps[ref] if np.isfinite(gaps[ref]) else 0.0
        others = np.delete(gaps, ref)
        others = others[np.isfinite(others)]
        big = np.abs(others) >= margin_points - 1e-9
        opposite = (others * g_ref <= 0) if abs(g_ref) <= 1e-9 else (others * g_ref < 0)
        out[target] = bool((big & opposite).any())
    return out


# which decision labels are errors (false alarms) under a truth with no reference gap, and
# under the margin's truth (a gap of about m in the observed direction under both targets):
# a winner where there is none, a target difference where both targets agree, a harness
# reversal the truth does not hold. `underpowered` is a correct call or a miss, never a
# false alarm; `unsupported` says the data cannot carry the target; verdicts and
# `manufactured` are descriptive of the stable set (`manufactured` is the correct call
# under no gap) and never false alarms.
_WRONG_UNDER_NO_GAP = ("stable", "target-sensitive")
_WRONG_UNDER_MARGIN = ("target-sensitive",)


def false_alarm(truth: str, outcome: str, target: str | None,
                reversal: dict[str, bool] | None) -> bool:
    """Whether `outcome` (a verdict, 'manufactured' or, with target, a label) is an error
    under a scenario's truth: truth is 'no gap', 'margin' or 'observed' (the observed grid:
    no known truth, nothing is judged). reversal: harness_reversal of the truth."""
    if target is None or truth == "observed":
        return False
    if outcome == "harness-sensitive":
        return not (reversal or {}).get(target, False)
    return outcome in (_WRONG_UNDER_NO_GAP if truth == "no gap" else _WRONG_UNDER_MARGIN)
