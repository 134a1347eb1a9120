"""Incomplete cells, a config subset, a benchmark subset and errors (SPEC §4, §11)."""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.analysis.classify import INCOMPLETE, classify
from fragility_tui.analysis.itemstats import discrimination, fragility
from fragility_tui.analysis.report import build_report

from analysis_grids import TINY, TINY_BENCHMARKS, make_cube

FAST = dict(n_boot=100, k=10, n_random=20)


@pytest.fixture
def holes():
    """TINY with m2's cloze_qa cell of i6 and m3's reference cell of i2 missing."""
    rows = {m: list(v) for m, v in TINY.items()}
    rows["m2"][5] = "010."
    rows["m3"][1] = ".110"
    return make_cube(rows, TINY_BENCHMARKS)


def test_incomplete_rows_are_counted_and_excluded(holes):
    codes = classify(holes).codes
    assert codes[1, 5] == INCOMPLETE and codes[2, 1] == INCOMPLETE
    r = build_report(holes, **FAST)
    b = {x["model"]: x for x in r["bands"]}
    # accuracy over present cells only; robust accuracy over complete rows only
    assert r["configs"][-1]["accuracy"]["m2"] == pytest.approx(3 / 5)
    assert b["m2"]["robust_accuracy"] == pytest.approx(2 / 5)
    assert (b["m2"]["incomplete"], b["m2"]["fragile"]) == (1, 1)
    assert b["m3"]["reference"] == pytest.approx(2 / 5)
    assert fragility(holes)[5] == pytest.approx(1 / 2)  # only m1 and m3 are complete on i6


def test_gap_counted_on_paired_items(holes):
    r = build_report(holes, **FAST)
    p23 = r["pairs"][1]
    assert (p23["a"], p23["b"]) == ("m2", "m3")
    # m3 lacks i2's reference cell: Δ over the 5 paired items is 3 - 2
    assert (p23["gap"], p23["a_only_stable"], p23["b_only_stable"]) == (1, 1, 1)
    assert (p23["fragile_gap"], p23["fragile_share"], p23["verdict"]) == (1, 1.0, "cancel")
    assert p23["manufactured"] is True


def test_discrimination_with_a_missing_reference_cell(holes):
    disc = discrimination(holes)
    assert np.isnan(disc[1])  # only m1, m2 remain and both have other-item accuracy 0.6
    assert disc[2] == pytest.approx(0.0)  # x = (1,1,0), y = (.6,.4,.5)


def test_config_subset():
    cube = make_cube(TINY, TINY_BENCHMARKS).select(configs=["o0.letter", "o1.letter"])
    r = build_report(cube, **FAST)
    b = {x["model"]: x for x in r["bands"]}
    assert (b["m2"]["robust_correct"], b["m2"]["robust_wrong"], b["m2"]["fragile"]) == (3, 3, 0)
    p12, p23 = r["pairs"]
    assert (p12["a_only_stable"], p12["b_only_stable"], p12["stable_items"]) == (1, 0, 3)
    assert (p23["stable_items"], p23["a_only_stable"], p23["b_only_stable"]) == (6, 2, 2)
    assert p23["verdict"] == "cancel"
    per = r["axes"]["per_model"]["m1"]
    assert per == {"order": 0.5, "format": None, "scoring": None, "all": 0.5}
    assert r["grid"]["configs"] == ["o0.letter", "o1.letter"]


def test_benchmark_subset(tiny):
    r = build_report(tiny.select(benchmarks=["b1"]), **FAST)
    assert r["grid"]["n_items"] == 3
    assert r["bands"][0]["model"] == "m1" and r["bands"][0]["reference"] == 1.0
    assert {d["target"] for d in r["decisions"]} == {"observed", "balanced"}


def test_reference_must_be_in_view(tiny):
    with pytest.raises(ValueError, match="o0.letter"):
        build_report(tiny.select(configs=["o1.letter", "cloze_qa"]), **FAST)


def test_only_reference_in_view(tiny):
    r = build_report(tiny.select(configs=["o0.letter"]), **FAST)
    assert r["axes"]["mean"] == {"order": None, "format": None, "scoring": None, "all": None}
    assert r["rankings"]["mean_kendall_tau"] is None
    # with one config every answer is robust
    assert all(b["fragile"] == 0 for b in r["bands"])


def test_unknown_pair_is_rejected(tiny):
    with pytest.raises(ValueError, match="nope"):
        build_report(tiny, pairs=[("m1", "nope")], **FAST)


def test_named_pair_is_split_and_decided(tiny):
    r = build_report(tiny, pairs=[("m3", "m1")], **FAST)
    named = [p for p in r["pairs"] if not p["adjacent"]]
    assert [(p["a"], p["b"], p["gap"]) for p in named] == [("m3", "m1", -1)]
    assert [(d["a"], d["b"], d["target"]) for d in r["decisions"] if not d["adjacent"]] == [
        ("m3", "m1", "observed"), ("m3", "m1", "balanced")]
    assert r["pairs_summary"]["nonzero_gaps"] == 1  # named pairs stay out of the summary


def test_default_reference_falls_back_in_canonical_order():
    from fragility_tui.harness.configs import default_reference

    assert default_reference(["cloze_qa", "o0.letter"]) == "o0.letter"
    assert default_reference(["cloze_bare", "o1.paren", "cloze_qa"]) == "o1.paren"
    assert default_reference(["cloze_bare", "cloze_qa"]) == "cloze_qa"
    assert default_reference([]) is None


def test_axis_neighbourhoods_follow_the_reference():
    from fragility_tui.analysis.axes import neighbourhoods
    from fragility_tui.harness.configs import CONFIG_IDS

    full = make_cube({"m": ["1" * 26]}, ["b1"], configs=CONFIG_IDS)
    names = lambda cube: {a: [cube.configs[k] for k in idx]  # noqa: E731
                          for a, idx in neighbourhoods(cube).items()}
    spec = names(full)
    assert spec["order"] == [f"o{k}.letter" for k in range(6)]
    assert spec["format"] == ["o0.letter", "o0.paren", "o0.digit", "o0.instruct"]
    assert spec["scoring"] == ["o0.letter", "cloze_qa", "cloze_bare"]
    paren = names(full.with_reference("o2.paren"))
    assert paren["order"] == [f"o{k}.paren" for k in range(6)]
    assert paren["format"] == ["o2.letter", "o2.paren", "o2.digit", "o2.instruct"]
    assert paren["scoring"] == ["o2.paren", "cloze_qa", "cloze_bare"]
    cloze = names(full.with_reference("cloze_bare"))
    assert cloze["order"] == ["cloze_bare"]
    # SPEC v5 §7: the cloze stems are their own axis, not formats
    assert cloze["format"] == ["cloze_bare"]
    assert cloze["stem"] == ["cloze_qa", "cloze_bare"]
    assert cloze["scoring"] == ["o0.letter", "cloze_bare"]
    assert all(len(spec[a]) == 1 for a in spec if a not in ("order", "format", "scoring", "all"))


def test_a_cloze_only_grid_reports_against_its_own_reference(tiny):
    cube = tiny.select(configs=["cloze_qa"]).with_reference("cloze_qa")
    r = build_report(cube, **FAST)
    assert r["grid"]["reference"] == r["settings"]["reference"] == "cloze_qa"
    # m2 leads under cloze_qa (4/6 against m1's 3/6 and m3's 2/6)
    assert [b["model"] for b in r["bands"]] == ["m2", "m1", "m3"]
    assert {d["config"] for d in r["decisions"]} == {"cloze_qa"}
    with pytest.raises(ValueError, match="reference config cloze_qa must be in view"):
        build_report(tiny.select(configs=["o0.letter"]).with_reference("cloze_qa"), **FAST)


def test_first_sections_equal_the_full_reports():
    """The app shows these first on a big grid: they must be the report's own figures."""
    from fragility_tui.analysis.report import build_report, first_sections
    from fragility_tui.grid.simulate import simulate_cube

    cube = simulate_cube(5, 60, seed=4)
    full = build_report(cube, name="g", n_boot=50, n_random=20)
    first = first_sections(cube, name="g").to_json()
    assert first["partial"] is True and "partial" not in full
    for section in ("grid", "bands", "configs"):
        assert first[section] == full[section]


def test_incomplete_rows_are_their_own_part_of_the_gap():
    """SPEC v3 §6 by hand: i1 stable for A, i2 A misses a cell (incomplete), i3 A fragile,
    i4 both robust-correct. Δ = 3 = stable 1 + incomplete 1 + fragile 1 (v2 read the
    missing cell as fragility: fragile gap 2)."""
    from analysis_grids import make_cube

    from fragility_tui.analysis.report import report_of
    from fragility_tui.analysis.report_text import render_text

    cube = make_cube({"A": ["11", "1.", "10", "11"], "B": ["00", "00", "00", "11"]},
                     ["b1"] * 4, configs=("o0.letter", "o0.paren"))
    typed = report_of(cube, n_boot=20, k=2, n_random=5)
    report = typed.to_json()
    (pair,) = report["pairs"]
    assert (pair["gap"], pair["stable_gap"], pair["incomplete_gap"], pair["fragile_gap"]) == (
        3, 1, 1, 1)
    assert pair["fragile_share"] == pytest.approx(1 / 3)
    assert pair["detail"] == "too few stable disagreements to order (n = 1)"
    assert report["spec_version"] == "5"
    text = render_text(typed)
    assert "inc" in text.split("Pairs: gap split")[1].splitlines()[2].split()
    assert "A vs B: too few stable disagreements to order (n = 1)" in text
