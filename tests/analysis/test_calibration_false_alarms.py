"""Issue 43 item 4: `calibrate` calls an outcome a false alarm only where it is an error
under the scenario's truth (not `manufactured` under no gap, not `harness-sensitive` where
the truth's harness reversal is real), states each truth's gaps, and says over which truths
a pooled rate was pooled."""

from __future__ import annotations

import pytest
from analysis_grids import make_cube

from fragility_tui.analysis import calibration as cal
from fragility_tui.analysis import calibration_truths as truths
from fragility_tui.analysis.decisions import TARGETS

CONFIGS = ("o0.letter", "o0.paren", "o1.letter", "cloze_qa")


def pair(rows_a, rows_b, benchmarks):
    return make_cube({"A": rows_a, "B": rows_b}, benchmarks, CONFIGS)


def test_config_gaps_per_target():
    # b1: 4 items, A ahead by 1 at the reference and by 2 under cloze_qa;
    # b2: 2 items, B ahead by 1 at the reference
    a = ["1111", "1101", "0001", "0000", "0000", "0000"]
    b = ["1111", "0100", "0000", "0000", "1000", "0000"]
    gaps = truths.config_gaps_points(pair(a, b, ["b1"] * 4 + ["b2"] * 2))
    assert gaps["observed"][0] == pytest.approx(0.0)  # +1 − 1 over 6 items
    assert gaps["balanced"][0] == pytest.approx((25.0 - 50.0) / 2)
    assert gaps["observed"][3] == pytest.approx(100 * 2 / 6)
    assert gaps["balanced"][3] == pytest.approx((50.0 + 0.0) / 2)


@pytest.mark.parametrize("other, reversal", [
    ("1", False),   # the other config agrees with the reference's winner
    ("0", True),    # it reverses it by 4 of 10 items (40 points >= m)
])
def test_harness_reversal_is_an_opposite_gap_of_at_least_m(other, reversal):
    # A ahead at the reference on 2 items; cloze_qa: B ahead on 4 (or A on 4)
    a = ["1000"] * 2 + [f"000{other}"] * 4 + ["0000"] * 4
    b = ["0000"] * 2 + [f"000{'0' if other == '1' else '1'}"] * 4 + ["0000"] * 4
    got = truths.harness_reversal(pair(a, b, ["b1"] * 10), 2.0)
    assert got == {"observed": reversal, "balanced": reversal}


def test_at_no_reference_gap_any_gap_of_m_elsewhere_is_a_real_reversal():
    a = ["0001"] + ["0000"] * 9
    b = ["0000"] * 10
    assert truths.harness_reversal(pair(a, b, ["b1"] * 10), 2.0)["observed"] is True
    assert truths.harness_reversal(pair(a, b, ["b1"] * 10), 20.0)["observed"] is False


def test_which_outcomes_are_errors_under_which_truth():
    fa = truths.false_alarm
    for verdict in (*cal.VERDICTS, "manufactured"):  # descriptive of the stable set
        assert not fa("no gap", verdict, None, None) and not fa("margin", verdict, None, None)
    assert fa("no gap", "stable", "observed", None)
    assert fa("no gap", "target-sensitive", "balanced", None)
    assert not fa("no gap", "underpowered", "observed", None)
    assert not fa("no gap", "unsupported", "balanced", None)
    assert fa("no gap", "harness-sensitive", "observed", {"observed": False})
    assert not fa("no gap", "harness-sensitive", "observed", {"observed": True})
    assert not fa("margin", "stable", "observed", None)
    assert fa("margin", "target-sensitive", "observed", None)
    assert not fa("margin", "harness-sensitive", "balanced", {"balanced": True})
    assert not any(fa("observed", x, "observed", None) for x in cal.LABELS)


def tally(labels: dict, reversal: bool, shortfall: int = 0, gap: float = 0.0):
    counts = dict.fromkeys(cal.LABELS, 0) | labels
    return {"verdicts": dict.fromkeys(cal.VERDICTS, 0) | {"identical": 10}, "manufactured": 7,
            "labels": {t: dict(counts) for t in TARGETS}, "mean_gap": 0.0,
            "true_gap_points": gap, "shortfall_items": shortfall,
            "harness_reversal": dict.fromkeys(TARGETS, reversal)}


def counts(reversal: bool, shortfall: int = 0, gap: float = 2.0):
    hs = tally({"harness-sensitive": 6, "stable": 1, "underpowered": 3}, reversal, shortfall)
    return {"a": "x", "b": "y", "replicates": 10, cal.REPRODUCIBILITY: tally(
        {"stable": 10}, reversal, gap=5.0), cal.EXCHANGEABLE: tally(
        {"underpowered": 9, "stable": 1}, False), cal.HARNESS_KEPT: hs,
        cal.POWER: tally({"harness-sensitive": 6, "stable": 4}, reversal, gap=gap)}


def test_false_alarm_rates_count_only_errors_under_each_truth():
    real = cal.rated(counts(reversal=True))
    assert real[cal.REPRODUCIBILITY]["false_alarms"] is None  # no known truth
    assert real[cal.EXCHANGEABLE]["false_alarms"]["observed"]["count"] == 1  # stable
    assert real[cal.HARNESS_KEPT]["false_alarms"]["observed"]["count"] == 1  # stable only
    assert real[cal.POWER]["false_alarms"]["observed"]["count"] == 0
    unreal = cal.rated(counts(reversal=False))
    assert unreal[cal.HARNESS_KEPT]["false_alarms"]["observed"]["count"] == 7
    assert unreal[cal.POWER]["false_alarms"]["observed"]["count"] == 6
    short = cal.rated(counts(reversal=False, shortfall=3))
    assert short[cal.HARNESS_KEPT]["false_alarms"] is None  # the truth was not reached


def test_the_pane_line_says_false_alarms_only_of_errors():
    for reversal, expect in ((True, False), (False, True)):
        result = cal.rated(counts(reversal))
        line = cal.summary_line(result, "harness-sensitive", "observed", width=200)
        assert line.endswith("(false alarms)") is expect
    result = cal.rated(counts(True))
    assert not cal.summary_line(result, "manufactured", width=200).endswith("(false alarms)")
    assert not cal.summary_line(result, "underpowered", "observed",
                                width=200).endswith("(false alarms)")
    assert cal.summary_line(result, "stable", "observed", width=200).endswith("(false alarms)")


def test_totals_name_the_truths_they_pool_and_judge_each_pair_on_its_own():
    pooled = cal.totals([counts(True, gap=0.3), counts(False, gap=3.8),
                         counts(False, shortfall=2, gap=1.0)])
    assert pooled[cal.POWER]["true_gaps_points"] == [0.3, 3.8, 1.0]
    assert pooled[cal.EXCHANGEABLE]["true_gaps_points"] == [0.0, 0.0, 0.0]
    # harness kept: pair 1 (reversal real) 1 false alarm, pair 2 7, pair 3 not judged
    alarms = pooled[cal.HARNESS_KEPT]["false_alarms"]["observed"]
    assert (alarms["count"], alarms["n"]) == (8, 20)
    assert pooled[cal.REPRODUCIBILITY]["false_alarms"] is None
