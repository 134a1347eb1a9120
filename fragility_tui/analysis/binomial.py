"""Binomial rates with their intervals: every share of replicates the calibration and the
controlled check print (a count out of n simulated grids) carries a 95% Wilson interval.

Wilson rather than the normal approximation: calibration shares sit at 0% or 100% for most
outcomes, where the normal interval collapses to a point; Wilson stays inside [0, 1], never
collapses, and its width shrinks as 1/sqrt(n) (tested)."""

from __future__ import annotations

import math

Z95 = 1.959964
INTERVAL_NAME = "wilson_95"  # how the JSON names the interval behind ci_low / ci_high


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of successes / n; (0, 1) when n is 0 (nothing known)."""
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at 0 and n the exact bound is 0 or 1; rounding would leave the rate outside its interval
    lo = 0.0 if successes == 0 else max(0.0, min(p, centre - half))
    hi = 1.0 if successes == n else min(1.0, max(p, centre + half))
    return (lo, hi)


def rate(count: int, n: int) -> dict:
    """{"count", "n", "rate", "ci_low", "ci_high"}: the JSON shape of every rate (rate null
    when n is 0)."""
    lo, hi = wilson(int(count), int(n))
    return {"count": int(count), "n": int(n), "rate": count / n if n else None,
            "ci_low": lo, "ci_high": hi}

