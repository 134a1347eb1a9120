"""SPEC §9 controlled check: the modal label recovers each checked scenario's known state,
and the fair baseline (the same flags on point estimates) is judged on the same replicates.

`selfcheck decisions --full` runs 300 replicates per scenario; this test runs fewer
replicates and resamples for speed, which keeps the assertion meaningful: a label rule
that failed a scenario would lose the modal label, and the stable rate must stay >= 99%.
"""

from __future__ import annotations

import pytest

import numpy as np

from fragility_tui.analysis.controlled import (CONFIGS, SCENARIOS, fair_baseline_label,
                                               run_check, simulate_pair, wilson)
from fragility_tui.grid.cube import Cube


@pytest.fixture(scope="module")
def results():
    return run_check(replicates=60, seed=0, n_boot=250)


def test_every_scenario_recovers_its_state(results):
    assert [r.scenario for r in results] == [s.name for s in SCENARIOS]
    assert len(results) >= 7
    for r in results:
        if r.checked:
            assert r.modal_label in r.recovering, (r.scenario, r.labels)
            assert r.outcome in ("pass", "undecided"), (r.scenario, r.labels)
    assert {r.scenario for r in results if not r.checked} == {
        "gap at m", "gap at 1.5 m", "gap 1.5 m, correlated"}


def test_stable_scenario_recovered_almost_always(results):
    stable = next(r for r in results if r.expected == "stable")
    assert stable.rate >= 0.99, stable.labels


def test_simulation_has_the_designed_gap():
    import numpy as np

    cube = simulate_pair(SCENARIOS[0], np.random.default_rng(0))
    diff = cube.bits[0].mean(axis=0) - cube.bits[1].mean(axis=0)
    assert diff == pytest.approx(np.full(len(cube.configs), 0.10), abs=0.04)


def test_wilson_interval():
    lo, hi = wilson(50, 100)
    assert (round(lo, 4), round(hi, 4)) == (0.4038, 0.5962)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-4)


def test_power_grows_with_the_true_gap(results):
    """Near the margin neither rule is sure; at 1.5 m both call `stable` more often than at
    m, and the clear 10-point gap almost always."""
    by_name = {r.scenario: r for r in results}
    for rate in ("rate", "baseline_rate"):
        at_m, above = (getattr(by_name[n], rate) for n in ("gap at m", "gap at 1.5 m"))
        assert 0.2 < at_m < 0.8 and above > at_m
        assert getattr(by_name["stable gap"], rate) >= 0.99


def test_every_rate_has_its_interval(results):
    for r in results:
        for rate, (lo, hi) in ((r.rate, r.interval), (r.baseline_rate, r.baseline_interval)):
            assert lo <= rate <= hi
        assert sum(r.labels.values()) == sum(r.baseline_labels.values()) == r.replicates


def test_correlated_configs_share_an_item_draw():
    """With correlation 0.8 an item's category agrees across configs far more often than
    the independent draws (the marginal gap stays as set)."""
    independent = next(s for s in SCENARIOS if s.name == "no gap")
    correlated = next(s for s in SCENARIOS if s.name == "no gap, correlated")
    agree = []
    for scenario in (independent, correlated):
        cube = simulate_pair(scenario, np.random.default_rng(1))
        agree.append((cube.bits[0, :, 0] == cube.bits[0, :, 1]).mean())
        assert cube.bits[0].mean() == pytest.approx(0.62, abs=0.03)
    assert agree[1] > agree[0] + 0.15


def cube_of(deltas_a, n=200, benches=("big", "small")):
    """A (0) and B (1): A right on the first k items of each benchmark under config c
    (k = deltas_a[c] items), B right on none; so Δ̂ per config is k / n."""
    bits = np.zeros((2, n * len(benches), len(CONFIGS)), dtype=bool)
    for c, k in enumerate(deltas_a):
        for s in range(len(benches)):
            if k >= 0:
                bits[0, s * n:s * n + k, c] = True
            else:
                bits[1, s * n:s * n - k, c] = True
    present = np.ones_like(bits)
    bench = np.array([b for b in benches for _ in range(n)], dtype=object)
    return Cube(("A", "B"), tuple(f"{b}/{i}" for b, i in zip(bench, range(len(bench)))),
                CONFIGS, bits, present, bench)


@pytest.mark.parametrize("deltas, label", [
    ((20, 20, 20, 20), "stable"),  # 10 points everywhere
    ((2, 2, 2, 2), "underpowered"),  # 1 point < m
    ((0, 0, 0, 0), "underpowered"),
    ((20, 20, 20, -8), "harness-sensitive"),  # cloze_qa: B by 4 points
    ((20, 20, 20, -3), "stable"),  # the reversal is smaller than m
    ((2, 20, 20, -8), "harness-sensitive"),  # §9 order: the flag precedes underpowered
    ((0, 20, 20, -8), "underpowered"),  # Δ̂ = 0 names no winner to reverse
])
def test_fair_baseline_applies_the_flags_in_order_on_point_estimates(deltas, label):
    assert fair_baseline_label(cube_of(deltas)) == label


def test_fair_baseline_target_sensitive_and_unsupported():
    bench = np.array(["big"] * 300 + ["small"] * 100, dtype=object)
    bits = np.zeros((2, 400, len(CONFIGS)), dtype=bool)
    bits[0, :60] = True  # A ahead by 20 points on big
    bits[1, 300:340] = True  # B ahead by 40 points on small
    mixed = Cube(("A", "B"), tuple(f"i{k}" for k in range(400)), CONFIGS, bits,
                 np.ones_like(bits), bench)
    # observed +5 points (A), balanced -10 (B): the other target reverses the winner
    assert fair_baseline_label(mixed) == "target-sensitive"
    assert fair_baseline_label(mixed, target="balanced") == "target-sensitive"
    cube = cube_of((20, 20, 20, 20))
    present = np.array(cube.present)
    present[1, 200:] = False
    gone = Cube(cube.models, cube.items, cube.configs, cube.bits & present, present,
                cube.benchmarks)
    assert fair_baseline_label(gone) == "unsupported"


def test_a_scenario_passes_only_when_its_error_bound_is_under_the_level():
    """A modal label alone passed a scenario with 45% errors; the bound does not."""
    from fragility_tui.analysis.controlled import ERROR_LEVEL, ScenarioResult

    def result(recovered, replicates=300, checked=True):
        return ScenarioResult("s", "stable", replicates, {"stable": recovered,
                              "underpowered": replicates - recovered}, recovered, {}, 0,
                              checked, ("stable",))

    noisy = result(165)  # 45% errors, modal label still right
    assert noisy.modal_label == "stable" and noisy.outcome == "FAIL" and not noisy.passed
    assert result(291).outcome == "pass"  # 3% errors: bound ~5.6%
    assert result(38, replicates=40).outcome == "undecided"  # 5%, bound ~17% at n = 40
    assert result(100, checked=False).outcome == "power" and ERROR_LEVEL == 0.15
