"""The stratified paired bootstrap behind SPEC §9's decisions (decisions.py), the Compare
pane's per-config deltas and the calibration: per-benchmark sums of a pair's difference, and
their resampled copies.

W[b] (resamples x items of benchmark b) counts how often each item is drawn; it is drawn once
per benchmark from the seed (Resamples) and applied to every (pair, config) column by a
float32 matmul (counts are exact in float32). A resample's Δ̂ is a ratio: Σ W·d / Σ W·paired,
so an item missing a cell for a pair simply weighs nothing for that pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.analysis.itemstats import STREAM_DECISIONS, resample_counts, rng_for
from fragility_tui.grid.cube import Cube

_ROWS_PER_CHUNK = 500  # resamples per chunk; fixed so every caller draws the same W


@dataclass(frozen=True, eq=False)
class Strata:
    """Benchmarks of a canonical cube as contiguous item ranges."""

    names: tuple[str, ...]
    starts: np.ndarray  # [S]
    stops: np.ndarray  # [S]


def strata_of(cube: Cube) -> Strata:
    bench = [str(b) for b in cube.benchmarks]
    starts = [i for i in range(len(bench)) if i == 0 or bench[i] != bench[i - 1]]
    stops = starts[1:] + [len(bench)]
    return Strata(tuple(bench[i] for i in starts), np.array(starts, dtype=np.intp),
                  np.array(stops, dtype=np.intp))


def point_counts(cube: Cube, strata: Strata, a_idx: np.ndarray, b_idx: np.ndarray):
    """num, den [P, S, C]: Σ(bit_a − bit_b) and paired items per pair, benchmark, config."""
    shape = (len(a_idx), len(strata.names), len(cube.configs))
    num, den = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    bounds = list(zip(strata.starts.tolist(), strata.stops.tolist()))
    if cube.complete:  # every item paired: each model's correct count per benchmark, once
        for s, (lo, hi) in enumerate(bounds):
            right = np.count_nonzero(cube.bits[:, lo:hi], axis=1)  # [M, C]
            num[:, s] = right[a_idx] - right[b_idx]
            den[:, s] = hi - lo
        return num, den
    paired = cube.present[a_idx] & cube.present[b_idx]
    a_right = cube.bits[a_idx] & paired
    b_right = cube.bits[b_idx] & paired
    for s, (lo, hi) in enumerate(bounds):
        num[:, s] = (np.count_nonzero(a_right[:, lo:hi], axis=1)
                     - np.count_nonzero(b_right[:, lo:hi], axis=1))
        den[:, s] = np.count_nonzero(paired[:, lo:hi], axis=1)
    return num, den


class Resamples:
    """The stratified bootstrap's resampling counts: per benchmark s, W[s] float32
    [n_boot, items of s], each benchmark resampled with replacement to its own size, drawn
    from the seed and the benchmark alone in chunks of _ROWS_PER_CHUNK resamples (so every
    caller draws the same W) on first use and kept, so a second set of columns (a decision's
    widened family) reuses them instead of drawing them again."""

    def __init__(self, strata: Strata, n_boot: int, seed: int):
        self.strata, self.n_boot, self.seed = strata, n_boot, seed
        self._w: dict[int, np.ndarray] = {}

    def __call__(self, s: int) -> np.ndarray:
        if s not in self._w:
            n = int(self.strata.stops[s] - self.strata.starts[s])
            rng = rng_for(self.seed, STREAM_DECISIONS * 1000 + s)
            w = np.empty((self.n_boot, n), dtype=np.float32)
            for start in range(0, self.n_boot, _ROWS_PER_CHUNK):
                rows = min(_ROWS_PER_CHUNK, self.n_boot - start)
                resample_counts(rng, n, rows, np.float32, out=w[start:start + rows])
            self._w[s] = w
        return self._w[s]


def bootstrap_counts(cube: Cube, strata: Strata, cols: np.ndarray, n_boot: int, seed: int,
                     resamples: Resamples | None = None):
    """num*, den* [S, B, K] float32 for columns cols[K, 3] = (model a, model b, config):
    each benchmark resampled with replacement to its own size (stratified, paired).
    resamples: the counts to use (drawn for this n_boot and seed), else drawn here. The
    sums are integers below 2^24, exact in float32, so how the products are split changes
    nothing."""
    resamples = resamples if resamples is not None else Resamples(strata, n_boot, seed)
    k = len(cols)
    num = np.empty((len(strata.names), n_boot, k), dtype=np.float32)  # each [s] set below
    den = np.empty_like(num)
    a, b, c = cols[:, [0]], cols[:, [1]], cols[:, [2]]
    for s, (lo, hi) in enumerate(zip(strata.starts.tolist(), strata.stops.tolist())):
        w, items = resamples(s), np.arange(lo, hi)[None, :]
        diff = cube.bits[a, items, c].astype(np.float32) - cube.bits[b, items, c]  # [K, n]
        paired = None if cube.complete else cube.present[a, items, c] & cube.present[b, items, c]
        if paired is None or paired.all():
            num[s], den[s] = w @ diff.T, hi - lo
        else:
            num[s], den[s] = w @ (diff * paired).T, w @ paired.T.astype(np.float32)
    return num, den


def target_estimates(num: np.ndarray, den: np.ndarray, supported: np.ndarray) -> dict:
    """{target: estimate} from per-benchmark sums num, den [S, ...]; supported [S, ...]
    marks the benchmarks a target may weigh (those with paired items at the point)."""
    num, den = num.astype(np.float64), den.astype(np.float64)  # exact counts, float64 ratios
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = num.sum(axis=0) / den.sum(axis=0)
        per_bench = num / den
        n_sup = supported.sum(axis=0)
        balanced = np.where(supported, per_bench, 0.0).sum(axis=0) / n_sup
        # a resample that lost every paired item of a supported benchmark is undefined
        lost = (supported & (den == 0)).any(axis=0)
        balanced = np.where(lost | (n_sup == 0), np.nan, balanced)
    return {"observed": observed, "balanced": balanced}


def complete_estimates(num: np.ndarray, sizes, supported: np.ndarray) -> dict:
    """target_estimates when every resample pairs every item (a complete cube), so den[s]
    is benchmark s's size in every resample: the same figures, bit for bit, without den's
    passes over [S, B, K]."""
    num = num.astype(np.float64)
    size = np.asarray(sizes, dtype=np.float64).reshape(-1, *([1] * (num.ndim - 1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = num.sum(axis=0) / size.sum()
        per_bench = num / size
        n_sup = supported.sum(axis=0)
        weighed = per_bench if supported.all() else np.where(supported, per_bench, 0.0)
        balanced = weighed.sum(axis=0) / n_sup
        lost = (supported & (size == 0)).any(axis=0)
        balanced = np.where(lost | (n_sup == 0), np.nan, balanced)
    return {"observed": observed, "balanced": balanced}
