"""Rates with intervals (analysis/binomial.py): every calibration and selfcheck rate."""

from __future__ import annotations

import pytest

from fragility_tui.analysis.binomial import rate, wilson
from fragility_tui.analysis.calibration_result import Rate


@pytest.mark.parametrize("count, n", [(0, 10), (3, 10), (10, 10), (1, 200), (97, 200)])
def test_the_interval_contains_the_rate(count, n):
    r = rate(count, n)
    assert r["rate"] == count / n and r["count"] == count and r["n"] == n
    assert 0.0 <= r["ci_low"] <= r["rate"] <= r["ci_high"] <= 1.0
    assert r["ci_low"] < r["ci_high"]  # never a point, even at 0% or 100%


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.97])
def test_the_interval_narrows_with_n(p):
    widths = []
    for n in (20, 100, 500, 2500):
        lo, hi = wilson(round(p * n), n)
        widths.append(hi - lo)
    assert all(a > b for a, b in zip(widths, widths[1:]))
    assert widths[-1] < 0.05


def test_known_values_and_bad_input():
    lo, hi = wilson(50, 100)
    assert (round(lo, 4), round(hi, 4)) == (0.4038, 0.5962)
    assert rate(0, 0) == {"count": 0, "n": 0, "rate": None, "ci_low": 0.0, "ci_high": 1.0}
    with pytest.raises(ValueError):
        wilson(11, 10)
    assert Rate.from_json(rate(1, 4)).with_interval() == "25% [5, 70]"
    assert Rate.from_json(rate(0, 0)).with_interval() == "–"
    assert Rate.from_json(rate(1, 4)).percent() == "25"
    assert Rate.from_json(rate(0, 0)).percent() == "–"
