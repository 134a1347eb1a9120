"""SPEC v4: a stable set that orders a pair against its gap is `reversed` (not an ordered,
non-manufactured pair), the verdict `ordered` is `differs`, and on exchangeable models with
unbalanced benchmarks the decision labels claim differences on ≤ 5% of adjacent pairs."""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.analysis.decisions import decide_pairs
from fragility_tui.analysis.pairs import gap_splits, pairs_summary
from fragility_tui.analysis.report import report_of
from fragility_tui.grid.cube import Cube
from fragility_tui.harness.configs import CONFIG_IDS

from analysis_grids import make_cube


def reversed_pair() -> Cube:
    """Gap +20 at the reference, yet the ten items the two models answer stably all go to
    B: 30 items A gets right only at the reference, 10 B gets right everywhere."""
    a = ["10"] * 30 + ["00"] * 10
    b = ["00"] * 30 + ["11"] * 10
    return make_cube({"A": a, "B": b}, ["x"] * 40, configs=("o0.letter", "o0.paren"))


def test_a_stable_set_against_the_gap_is_reversed_not_ordered():
    (split,) = gap_splits(reversed_pair(), [(0, 1)])
    assert (split.gap, split.a_only_stable, split.b_only_stable, split.stable_gap) == (
        20, 0, 10, -10)
    assert split.mcnemar_p == pytest.approx(2 * 0.5 ** 10)  # 0.002
    assert (split.verdict, split.support, split.reversed, split.manufactured) == (
        "differs", "reversed", True, False)
    assert split.fragile_share == pytest.approx(1.5)  # above 1: the stable set leans against Δ
    summary = pairs_summary([split])
    assert (summary.reversed, summary.supported, summary.manufactured) == (1, 0, 0)


def test_support_follows_the_exact_test_and_the_gaps_sign():
    cube = make_cube({"A": ["11"] * 10 + ["10"] * 5, "B": ["00"] * 10 + ["00"] * 5},
                     ["x"] * 15, configs=("o0.letter", "o0.paren"))
    (split,) = gap_splits(cube, [(0, 1)])
    assert (split.support, split.verdict, split.reversed) == ("supported", "differs", False)
    tied = make_cube({"A": ["11", "00"], "B": ["00", "11"]}, ["x"] * 2,
                     configs=("o0.letter", "o0.paren"))
    (split,) = gap_splits(tied, [(0, 1)])
    assert (split.gap, split.support, split.manufactured) == (0, None, False)


def test_the_report_json_carries_support_reversed_and_the_summary_counts():
    report = report_of(reversed_pair(), n_boot=50, k=2, n_random=5).to_json()
    (pair,) = report["pairs"]
    assert (pair["support"], pair["reversed"], pair["verdict"]) == ("reversed", True, "differs")
    assert report["pairs_summary"]["reversed"] == 1
    assert report["pairs_summary"]["supported"] == 0
    assert report["spec_version"] == "5"


def exchangeable_grid(seed: int, latent_sd: float, sizes=(200, 3, 3, 3, 3),
                      n_models: int = 20) -> Cube:
    """Models drawn alike (no pair differs in any config in expectation), with real harness
    effects shared by all models and, with latent_sd > 0, a per-(model, item) latent that
    holds in every config (so items are robust for a model for reasons of its own)."""
    rng = np.random.default_rng(seed)
    n_items, n_configs = sum(sizes), len(CONFIG_IDS)
    item = rng.normal(0.3, 1.0, n_items)[None, :, None]
    harness = rng.normal(0.0, 0.8, (1, n_items, n_configs))
    latent = rng.normal(0.0, latent_sd, (n_models, n_items, 1))
    noise = rng.normal(0.0, 1.0, (n_models, n_items, n_configs))
    bits = (item + harness + latent + noise) > 0
    benchmarks = np.array([f"b{k}" for k, n in enumerate(sizes) for _ in range(n)],
                          dtype=object)
    models = tuple(f"m{k:02d}" for k in range(n_models))
    items = tuple(f"{b}/i{i}" for i, b in enumerate(benchmarks))
    return Cube(models, items, tuple(CONFIG_IDS), bits, np.ones_like(bits), benchmarks)


def adjacent_decisions(cube: Cube) -> list:
    ref = cube.reference_index
    accuracy = cube.bits[:, :, ref].mean(axis=1)
    ranked = sorted(range(len(cube.models)), key=lambda m: (-accuracy[m], cube.models[m]))
    pairs = [(cube.models[a], cube.models[b]) for a, b in zip(ranked, ranked[1:])]
    return decide_pairs(cube, pairs, n_boot=500, seed=0)


@pytest.mark.parametrize("latent_sd", [0.0, 2.0], ids=["no-latent", "strong-latent"])
def test_exchangeable_models_raise_labels_on_at_most_five_percent(latent_sd):
    decisions = [d for seed in range(4) for d in adjacent_decisions(
        exchangeable_grid(seed, latent_sd))]
    assert len(decisions) == 4 * 19 * 2
    rate = {flag: np.mean([flag in d.flags for d in decisions])
            for flag in ("harness-sensitive", "target-sensitive")}
    rate["stable"] = np.mean([d.label == "stable" for d in decisions])
    assert all(r <= 0.05 for r in rate.values()), rate
    # the 3-item benchmarks make every balanced decision unsupported (v4), naming them
    balanced = [d for d in decisions if d.target == "balanced"]
    assert all(d.label == "unsupported" and set(d.unsupported_benchmarks) == {
        "b1", "b2", "b3", "b4"} for d in balanced)


def test_the_text_says_in_words_when_the_stable_set_leans_against_the_gap():
    from fragility_tui.analysis.report_text import render_markdown, render_text

    typed = report_of(reversed_pair(), n_boot=50, k=2, n_random=5)
    text = " ".join(render_text(typed).split())
    assert "150.0 !" in text and "reversed" in text
    assert "over 100 because the stable items order the pair against its gap (0 vs 10" in text
    assert "1 reversed" in text
    assert "over 100 because" in render_markdown(typed)


def test_every_adjacent_decision_shows_its_simultaneous_interval():
    from fragility_tui.analysis.report_text import render_text

    cube = exchangeable_grid(0, 2.0, sizes=(60, 40), n_models=4)
    typed = report_of(cube, n_boot=100, k=5, n_random=5)
    adjacent = [d for d in typed.decisions if d.adjacent]
    assert adjacent and all(d.simultaneous_ci is not None for d in adjacent)
    text = render_text(typed)
    assert "family CI" in text
    for d in adjacent:
        lo, hi = d.simultaneous_ci
        assert f"[{100 * lo:.1f}, {100 * hi:.1f}]".replace("-0.0", "0.0") in text
