"""SPEC §9 decisions on grids whose every bootstrap resample gives the same Δ̂, so the
interval, every flag and the label are known exactly."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_grids import uniform_pair

from fragility_tui.analysis.decisions import (decide, decide_pairs, simultaneous_intervals)
from fragility_tui.analysis.pairs import mcnemar_exact_p
from fragility_tui.analysis.report import build_report

BOOT = dict(seed=0, n_boot=200)


def both(cube, **kw):
    obs, bal = decide_pairs(cube, [("A", "B")], **BOOT, **kw)
    return obs, bal


def test_stable():
    obs, bal = both(uniform_pair({"x": (30, "A"), "y": (20, "A")}))
    assert (obs.delta, obs.ci, obs.label, obs.flags) == (1.0, (1.0, 1.0), "stable", ())
    assert (bal.delta, bal.label) == (1.0, "stable")
    assert (obs.mcnemar_a_only, obs.mcnemar_b_only) == (50, 0)
    assert obs.mcnemar_p == pytest.approx(2 * 0.5 ** 50)
    assert obs.n_items == 50
    assert [(x.benchmark, x.n_items, x.delta) for x in obs.per_benchmark] == [
        ("x", 30, 1.0), ("y", 20, 1.0)]


def test_harness_sensitive():
    cube = uniform_pair({"x": (30, "A"), "y": (10, "A")},
                        override={("x", "cloze_qa"): "B", ("y", "cloze_qa"): "B"})
    obs, _ = both(cube)
    assert (obs.label, obs.flags, obs.harness_configs) == (
        "harness-sensitive", ("harness-sensitive",), ("cloze_qa",))
    # the reversed config must clear the margin: a 1-point reversal does not count
    small = uniform_pair({"x": (99, "="), "y": (1, "=")},
                         override={("x", "o0.letter"): "A", ("y", "cloze_qa"): "B"})
    assert "harness-sensitive" not in both(small)[0].flags


def test_target_sensitive_and_delta_zero():
    # observed: (30 - 20) / 50 = +0.2; balanced: (1 + -1) / 2 = 0; the movement is exactly -0.2
    obs, bal = both(uniform_pair({"x": (30, "A"), "y": (20, "B")}))
    assert (obs.delta, obs.ci, obs.label, obs.flags) == (0.2, (0.2, 0.2), "target-sensitive",
                                                         ("target-sensitive",))
    assert obs.movement_ci == pytest.approx((-0.2, -0.2))
    assert (bal.delta, bal.other_target_delta) == (0.0, 0.2)
    # Δ̂ = 0: never harness-sensitive; underpowered, and still target-sensitive
    assert (bal.label, bal.flags) == ("underpowered", ("underpowered", "target-sensitive"))


def test_sign_reversal_between_targets():
    # observed (40 - 40) / 80 = 0: no winner at all
    obs, bal = both(uniform_pair({"x": (40, "A"), "y": (20, "B"), "z": (20, "B")}))
    assert obs.delta == pytest.approx(0.0) and obs.label == "underpowered"
    # observed (60 - 40) / 100 = +0.2; balanced (1 - 1 - 1) / 3 = -1/3: a strict reversal
    obs, bal = both(uniform_pair({"x": (60, "A"), "y": (20, "B"), "z": (20, "B")}))
    assert obs.delta == pytest.approx(0.2) and bal.delta == pytest.approx(-1 / 3)
    assert "target-sensitive" in obs.flags and "target-sensitive" in bal.flags


def test_unsupported_still_reports_delta():
    cube = uniform_pair({"x": (30, "A"), "y": (10, "A")}, override={("y", "B-missing"): True})
    obs, bal = both(cube)
    assert (obs.label, obs.flags, obs.unsupported_benchmarks) == (
        "unsupported", ("unsupported",), ("y",))
    assert (obs.delta, obs.ci, obs.n_items) == (1.0, (1.0, 1.0), 30)
    assert (bal.delta, bal.label) == (1.0, "unsupported")
    assert obs.per_benchmark[1].delta is None and obs.per_benchmark[1].n_items == 0


def test_identical_models_are_underpowered():
    obs, bal = both(uniform_pair({"x": (20, "="), "y": (20, "0")}))
    assert (obs.delta, obs.ci, obs.flags) == (0.0, (0.0, 0.0), ("underpowered",))
    assert obs.mcnemar_p == 1.0


@pytest.mark.parametrize("delta, ci, flags", [
    (0.05, (0.01, 0.09), ()),                       # same side: the winner is supported
    (-0.05, (-0.09, -0.01), ()),
    (0.05, (-0.09, -0.01), ("underpowered",)),      # wholly opposite Δ̂: not supported
    (-0.05, (0.01, 0.09), ("underpowered",)),
    (0.05, (0.0, 0.09), ("underpowered",)),         # touches zero
    (0.0, (0.01, 0.09), ("underpowered",)),         # no winner to support (m = 0)
])
def test_underpowered_is_direction_aware(delta, ci, flags):
    from fragility_tui.analysis.decisions import _flags
    assert _flags(delta, ci, False, False, (delta, None, None), 0.0) == flags


def test_an_interval_opposite_the_estimate_is_not_stable(monkeypatch):
    """End to end: with every interval mirrored to the other side of zero, the pair that
    is stable above (Δ̂ = 1, interval [1, 1]) becomes underpowered, not stable."""
    from fragility_tui.analysis import decisions

    real = decisions.percentile_ci
    monkeypatch.setattr(decisions, "percentile_ci",
                        lambda samples, *a: tuple(-x for x in real(samples, *a)[::-1]))
    obs, bal = both(uniform_pair({"x": (30, "A"), "y": (20, "A")}))
    assert (obs.delta, obs.ci) == (1.0, (-1.0, -1.0))
    assert (obs.label, obs.flags) == ("underpowered", ("underpowered",))
    assert bal.label == "underpowered"


def test_margin_is_compared_exactly():
    # Δ̂ = 7 / 350 = 2 points (each benchmark always resamples to itself: CI is a point)
    cube = uniform_pair({"x": (7, "A"), "y": (343, "=")})
    obs = both(cube, margin=2.0)[0]
    assert obs.delta == pytest.approx(0.02) and obs.ci == (obs.delta, obs.delta)
    assert "underpowered" not in obs.flags  # |Δ̂| ≥ m holds at equality
    assert "underpowered" in both(cube, margin=2.001)[0].flags


def test_decide_matches_report_and_is_deterministic():
    cube = uniform_pair({"x": (30, "A"), "y": (10, "B")}, override={("x", "o1.letter"): "="})
    rng = np.random.default_rng(1)
    flip = rng.random(cube.bits.shape) < 0.2
    noisy = cube.__class__(cube.models, cube.items, cube.configs, cube.bits ^ flip,
                           cube.present, cube.benchmarks)
    d1 = decide(noisy, "A", "B", target="balanced", seed=3, n_boot=300)
    d2 = decide(noisy, "A", "B", target="balanced", seed=3, n_boot=300)
    assert d1 == d2 and d1.ci[0] < d1.delta < d1.ci[1]
    rep = build_report(noisy, seed=3, n_boot=300, k=5, n_random=10)
    from_report = [d for d in rep["decisions"] if d["target"] == "balanced"][0]
    assert (from_report["delta"], from_report["ci"], from_report["label"]) == (
        d1.delta, list(d1.ci), d1.label)


def test_simultaneous_intervals_cover_and_widen():
    rng = np.random.default_rng(0)
    samples = rng.normal(0, 1, (4000, 5)) * np.array([1, 2, 3, 4, 5])
    point = np.zeros(5)
    lo, hi = simultaneous_intervals(samples, point)
    single = np.percentile(samples, [2.5, 97.5], axis=0)
    assert (lo < single[0]).all() and (hi > single[1]).all()  # wider than pointwise
    covered = ((samples >= lo) & (samples <= hi)).all(axis=1).mean()
    assert covered == pytest.approx(0.95, abs=0.01)
    # a member with no variance gets the degenerate interval
    lo, hi = simultaneous_intervals(np.zeros((10, 1)), np.array([0.3]))
    assert (lo[0], hi[0]) == (0.3, 0.3)


@pytest.mark.parametrize("a, b", [(0, 0), (1, 0), (5, 1), (10, 2), (30, 12), (0, 40), (7, 7),
                                  (2600, 2700), (3000, 2900), (6000, 5800)])
def test_mcnemar_matches_scipy_binomtest(a, b):
    from scipy.stats import binomtest

    expected = binomtest(a, a + b, 0.5).pvalue if a + b else 1.0
    assert mcnemar_exact_p([a], [b])[0] == pytest.approx(expected, rel=1e-9)


def test_balanced_needs_twenty_paired_items_in_every_benchmark():
    """SPEC §9 v4: a benchmark of a handful of items would carry a full benchmark's weight
    under the balanced target: unsupported, naming it; the observed target is unaffected,
    and target-sensitive is not judged against an unsupported balanced target."""
    obs, bal = both(uniform_pair({"x": (30, "A"), "y": (19, "B")}))
    assert (bal.label, bal.unsupported_benchmarks) == ("unsupported", ("y",))
    assert bal.delta == pytest.approx(0.0)  # still reported, over the benchmarks with items
    assert obs.unsupported_benchmarks == () and "target-sensitive" not in obs.flags
    assert obs.label == "stable"  # (30 - 19) / 49, a point interval, no other config
    assert both(uniform_pair({"x": (30, "A"), "y": (20, "B")}))[1].label != "unsupported"


def test_a_bare_sign_change_of_a_zero_gap_is_not_target_sensitive():
    """v3 raised target-sensitive whenever the two targets' estimates fell on either side
    of zero; v4 asks the other target to support its winner (|Δ̂| ≥ m, interval off zero)."""
    from fragility_tui.analysis.decisions import _flags

    noise = (-0.004, (-0.03, 0.02), (-0.04, 0.03))  # other Δ̂, its interval, the movement's
    assert "target-sensitive" not in _flags(0.005, (-0.02, 0.03), False, False, noise, 0.02)
    real = (-0.05, (-0.08, -0.02), (-0.09, -0.02))
    assert "target-sensitive" in _flags(0.01, (-0.02, 0.04), False, False, real, 0.02)
    assert "target-sensitive" not in _flags(0.01, (-0.02, 0.04), False, False, None, 0.02)
