"""Issue 24 (10): every label says why: a decision's label names the failed condition, a
pair's verdict says it is about the stable set."""

from __future__ import annotations

from fragility_tui.tui.formats import decision_reason, verdict_reason
from fragility_tui.tui.panes.compare import CompareResult, summary_text


def decision(**kw) -> dict:
    d = {"a": "A", "b": "B", "target": "observed", "label": "underpowered", "delta": 0.0,
         "ci": [0.0, 0.0], "margin_points": 2.0, "flags": ["underpowered"],
         "harness_configs": [], "unsupported_benchmarks": [], "other_target_delta": None,
         "mcnemar": {"a_only": 0, "b_only": 0, "p": 1.0}, "per_benchmark": []}
    return {**d, **kw}


def test_underpowered_says_which_condition_failed():
    why = decision_reason(decision())
    assert "includes 0" in why and "< margin m = 2 pts" in why
    why = decision_reason(decision(delta=0.01, ci=[0.005, 0.015]))  # CI excludes 0, 1 pt < m
    assert "includes 0" not in why and "|Δ̂| 1.0 < margin" in why
    why = decision_reason(decision(delta=0.05, ci=[-0.01, 0.1]))  # 5 pts, CI includes 0
    assert "includes 0" in why and "margin" not in why


def test_other_labels_say_why():
    assert "ARC" in decision_reason(decision(label="unsupported",
                                             unsupported_benchmarks=["ARC"]))
    assert "o3.digit" in decision_reason(decision(label="harness-sensitive",
                                                  harness_configs=["o3.digit"]))
    assert "other target" in decision_reason(decision(label="target-sensitive",
                                                      other_target_delta=-0.02))


def test_unsupported_says_whether_a_benchmark_is_empty_or_too_small_to_weigh():
    """The balanced target leaves a benchmark of fewer than 20 paired items unsupported; the
    reason said it had "no complete cells" where both models had every cell."""
    why = decision_reason(decision(
        label="unsupported", target="balanced", unsupported_benchmarks=["arc", "small"],
        per_benchmark=[{"benchmark": "arc", "n_items": 0}, {"benchmark": "small",
                                                            "n_items": 12}]))
    assert why == ("no item complete for both models in arc; fewer than 20 paired items to "
                   "weigh in small (12)")


def test_identical_is_about_the_stable_set():
    pair = {"a": "A", "b": "B", "gap": 4, "stable_items": 20, "a_only_stable": 0,
            "b_only_stable": 0, "stable_gap": 0, "verdict": "identical", "manufactured": True}
    why = verdict_reason(pair)
    assert "stable set (|S| = 20)" in why and "Δ = 4 lies outside S" in why
    assert "manufactured" in why


def test_the_compare_summary_shows_the_why():
    text = summary_text(CompareResult("A", "B", [decision()], {"A": "x", "B": "y"})).plain
    assert "why: the 95% CI [+0.0, +0.0] includes 0" in text


def test_an_adjacent_pairs_compare_shows_its_family_interval_and_a_reversed_split():
    """SPEC v4 in the app: the simultaneous interval of an adjacent pair (only in the JSON
    before), the benchmarks behind an unsupported decision, and a reversed stable set."""
    adjacent = decision(simultaneous_ci=[-0.031, 0.052], label="unsupported",
                        unsupported_benchmarks=["truthfulqa"])
    text = summary_text(CompareResult("A", "B", [adjacent], {"A": "x", "B": "y"})).plain
    assert "over all adjacent pairs [-3.1, +5.2]" in text
    assert "unsupported by: truthfulqa" in text
    reversed_pair = {"a": "A", "b": "B", "gap": 20, "stable_items": 10, "a_only_stable": 0,
                     "b_only_stable": 10, "stable_gap": -10, "verdict": "differs",
                     "support": "reversed", "manufactured": False}
    assert "against Δ = 20" in verdict_reason(reversed_pair)


def test_compare_shows_both_accuracies_and_the_discordant_items():
    """Issue 44: the tour's "33 items only the base build gets right, 12 only int4"."""
    from fragility_tui.analysis.pair_detail import ConfigPair

    at = ConfigPair("cloze_qa", 0.434, 0.355, 265, 33, 12)
    text = summary_text(CompareResult("A", "B", [decision()], {"A": "x", "B": "y"},
                                      at_reference=at)).plain
    assert "at cloze_qa: A 43.4 % · B 35.5 % · of 265 paired items 33 only A gets right, " \
           "12 only B" in text


def test_a_share_of_exactly_one_carries_no_warning_words():
    """A pooled share of 1 can come out of the division as 1.0000000000000002."""
    from fragility_tui.tui.formats import share_cell, share_words

    assert share_words(1.0000000000000002) == "100.0 %"
    assert share_cell(1.0000000000000002).plain == "100.0"
    assert "over 100" in share_words(1.002) and share_cell(1.5).plain == "150.0 !"
