"""SPEC v3 §9: simultaneous (max-|t|) bootstrap bands, and the `harness-sensitive` test they
serve: does another config in view support the opposite winner?

One interval per config at 95% raised the flag on pure noise in half of the adjacent-pair
decisions of a 26-config grid (tests/analysis/test_analysis_false_alarms.py); v3 judges the
other configs as one family, with a band whose 95% holds for all of them at once. The same
band gives the adjacent pairs' simultaneous intervals. Pure functions of resampled
estimates: the resampling itself is decisions.py's.
"""

from __future__ import annotations

import numpy as np

TOL = 1e-9  # §11: comparisons against zero and the margin tolerate float noise only
LEVEL = 0.95


def sign(x: float | None) -> int:
    if x is None or not np.isfinite(x) or abs(x) <= TOL:
        return 0
    return 1 if x > 0 else -1


def max_t_band(samples: np.ndarray, point: np.ndarray, level: float = LEVEL, *,
               drop_undefined: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Studentised max-deviation band for a family of estimates.

    samples [B, P], point [P]: se_p = the bootstrap standard deviation of member p over
    its defined resamples; q = the level-quantile over resamples of max_p |Δ*−Δ̂|/se_p
    (members with se = 0 or an undefined point left out of the max, their interval the
    point); interval Δ̂_p ± q·se_p. A resample undefined for every member is dropped, or,
    with drop_undefined=False, counts as −inf: then q can only shrink when members are
    removed, which makes a band over a sub-family a lower bound of the full family's."""
    finite = np.isfinite(samples)
    n_ok = finite.sum(axis=0)
    filled = np.where(finite, samples, 0.0)
    mean = filled.sum(axis=0) / np.maximum(n_ok, 1)
    se = np.sqrt((np.where(finite, samples - mean, 0.0) ** 2).sum(axis=0) / np.maximum(n_ok, 1))
    use = np.isfinite(point) & (n_ok > 0) & (se > 0)
    lo, hi = point.astype(np.float64), point.astype(np.float64)
    if use.any():
        dev = np.abs(samples[:, use] - point[use]) / se[use]
        worst = np.where(np.isfinite(dev), dev, -np.inf).max(axis=1)
        if drop_undefined:
            worst = worst[np.isfinite(dev).any(axis=1)]
        q = float(np.percentile(worst, level * 100)) if len(worst) else np.nan
        lo[use], hi[use] = point[use] - q * se[use], point[use] + q * se[use]
    return lo, hi


def simultaneous_intervals(samples: np.ndarray, point: np.ndarray, level: float = LEVEL):
    """The max-|t| band (dropping resamples undefined for every member): [B, P], [P] ->
    (lo[P], hi[P]); members with se = 0 get the degenerate interval [Δ̂, Δ̂]."""
    return max_t_band(samples, point, level)


def reversing(row: np.ndarray, c0: int, m: float) -> np.ndarray:
    """Configs (indices) other than c0 whose point estimate strictly reverses the sign of
    row[c0] with |Δ̂| ≥ m: the only ones that can support the opposite winner."""
    s0 = sign(float(row[c0]))
    if not s0:
        return np.zeros(0, dtype=np.intp)
    with np.errstate(invalid="ignore"):
        hit = np.isfinite(row) & (np.abs(row) > TOL) & (np.sign(row) == -s0) \
            & (np.abs(row) >= m - TOL)
    hit[c0] = False
    return np.flatnonzero(hit)


def opposite_winners(samples: np.ndarray, est: np.ndarray, s0: int, m: float, *,
                     drop_undefined: bool = True) -> np.ndarray:
    """Members [P] of a family (samples [B, P], point estimates est [P]) that support the
    winner opposite to sign s0: strict sign reversal, |Δ̂| ≥ m, and the simultaneous
    interval strictly on the other side of zero."""
    lo, hi = max_t_band(samples, est, drop_undefined=drop_undefined)
    with np.errstate(invalid="ignore"):
        excludes = (hi < -TOL) if s0 > 0 else (lo > TOL)
        return (np.isfinite(est) & np.isfinite(lo) & np.isfinite(hi) & (np.abs(est) > TOL)
                & (np.sign(est) == -s0) & (np.abs(est) >= m - TOL) & excludes)
