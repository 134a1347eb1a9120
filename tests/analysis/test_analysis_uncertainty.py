"""Issue 20 item 5: uncertainty over models too. The two-way (items and models) interval of
the discrimination-fragility r, and the item interval of the pooled fragile share, each
against a plain reading: build every resampled grid explicitly and recompute the figure
with the project's own one-grid functions."""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.analysis.classify import classify
from fragility_tui.analysis.itemstats import (STREAM_POOLED_SHARE, STREAM_TWO_WAY, Z_95,
                                              discrimination, fragility, pearson,
                                              resample_counts, rng_for, two_way_pearson_ci)
from fragility_tui.analysis.pairs import adjacent_pairs, gap_splits
from fragility_tui.analysis.pooled_share import pooled_share_ci
from fragility_tui.analysis.report import report_of
from fragility_tui.analysis.report_text import render_text
from fragility_tui.grid.cube import Cube


def random_cube(seed: int, n_models: int = 6, n_items: int = 40, missing: float = 0.05) -> Cube:
    rng = np.random.default_rng(seed)
    configs = ("o0.letter", "o0.paren", "o1.letter", "cloze_qa")
    ability = rng.normal(0, 1, n_models)[:, None, None]
    ease = rng.normal(0, 1, n_items)[None, :, None]
    p = 1 / (1 + np.exp(-(ability + ease + rng.normal(0, 1, (1, n_items, len(configs))))))
    present = rng.random((n_models, n_items, len(configs))) >= missing
    bits = (rng.random(present.shape) < p) & present
    bench = np.array(["b1", "b2"] * (n_items // 2), dtype=object)
    return Cube(tuple(f"m{k}" for k in range(n_models)),
                tuple(f"{bench[i]}/{i}" for i in range(n_items)), configs, bits, present, bench)


def resampled(cube: Cube, wm: np.ndarray, wi: np.ndarray) -> Cube:
    """The grid with model m repeated wm[m] times and item i wi[i] times."""
    m = np.repeat(np.arange(len(cube.models)), wm.astype(int))
    i = np.repeat(np.arange(len(cube.items)), wi.astype(int))
    grid = np.ix_(m, i, np.arange(len(cube.configs)))
    return Cube(tuple(f"m{k}" for k in range(len(m))), tuple(f"i{k}" for k in range(len(i))),
                cube.configs, cube.bits[grid], cube.present[grid], cube.benchmarks[i])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_way_interval_matches_explicit_resampled_grids(seed):
    cube = random_cube(seed)
    cls = classify(cube)
    disc, frag = discrimination(cube), fragility(cube, cls)
    both = np.isfinite(disc) & np.isfinite(frag)
    r = pearson(disc[both], frag[both])
    n_boot = 60
    got = two_way_pearson_ci(cube, cls, r, n_boot, rng_for(seed, STREAM_TWO_WAY))

    rng = rng_for(seed, STREAM_TWO_WAY)  # one chunk on a grid this small: same draws
    wm = resample_counts(rng, len(cube.models), n_boot)
    wi = resample_counts(rng, len(cube.items), n_boot)
    plain = []
    for k in range(n_boot):
        rc = resampled(cube, wm[k], wi[k])
        d, f = discrimination(rc), fragility(rc)
        ok = np.isfinite(d) & np.isfinite(f)
        value = pearson(d[ok], f[ok])
        if value is not None:
            plain.append(value)
    sd = np.std(plain, ddof=1)
    assert got == pytest.approx((r - Z_95 * sd, r + Z_95 * sd), rel=1e-9, abs=1e-12)


def test_two_way_interval_stays_a_correlations_range():
    """r ± 1.96·sd left [-1, 1] on a grid of few models (the README's harness grid gave
    [-0.13, 1.11]): the interval is cut to what a correlation can be."""
    cube = random_cube(22, n_models=3)
    cls = classify(cube)
    disc, frag = discrimination(cube), fragility(cube, cls)
    both = np.isfinite(disc) & np.isfinite(frag)
    r = pearson(disc[both], frag[both])
    low, high = two_way_pearson_ci(cube, cls, r, 200, rng_for(22, STREAM_TWO_WAY))
    assert -1.0 < low < r and high == 1.0


def test_compression_at_or_above_the_grids_items_says_nothing_was_compressed():
    typed = report_of(random_cube(5, n_items=40), n_boot=50, k=100, n_random=5)
    assert typed.to_json()["compression"]["grid_items"] == 40
    text = " ".join(render_text(typed).split())
    assert "champions with all 40 items" in text and "nothing to compress" in text
    assert "champions with 100 items" not in text
    cut = " ".join(render_text(report_of(random_cube(5, n_items=40), n_boot=50, k=10,
                                         n_random=5)).split())
    assert "champions with 10 items: random" in cut


@pytest.mark.parametrize("seed", [0, 3])
def test_pooled_share_interval_matches_explicit_resamples(seed):
    cube = random_cube(seed, missing=0.1)
    cls = classify(cube)
    adjacent = adjacent_pairs(cube)
    n_boot = 80
    got = pooled_share_ci(cube, adjacent, cls, n_boot=n_boot, seed=seed)
    counts = resample_counts(rng_for(seed, STREAM_POOLED_SHARE), len(cube.items), n_boot)
    keep = [(a, b) for (a, b), s in zip(adjacent, gap_splits(cube, adjacent, cls))
            if s.gap != 0]
    shares = []
    for w in counts:
        splits = gap_splits(resampled(cube, np.ones(len(cube.models)), w), keep)
        total = sum(s.gap for s in splits)
        if total:
            shares.append(sum(s.fragile_gap for s in splits) / total)
    assert got == pytest.approx(tuple(np.percentile(shares, [2.5, 97.5])), rel=1e-9)


def test_report_names_each_interval_by_what_it_resamples():
    typed = report_of(random_cube(5, n_items=60), n_boot=50, k=5, n_random=5)
    report = typed.to_json()
    d, ps = report["discrimination"], report["pairs_summary"]
    assert (d["ci_unit"], d["ci_two_way_unit"], ps["pooled_fragile_share_ci_unit"]) == (
        "items", "items and models", "items")
    assert d["ci_two_way"][0] < d["ci"][0] and d["ci"][1] < d["ci_two_way"][1]
    text = " ".join(render_text(typed).split())  # prose wraps (issue 43)
    assert "resampling items and models" in text and "resampling items)" in text


def test_a_model_without_reference_cells_is_named_with_the_configs_every_model_has():
    """A grid imported from several harnesses' logs is measured against its first config,
    which one harness alone may have: the report's empty pairs said nothing of why."""
    cube = random_cube(4, n_models=3, n_items=40, missing=0.0)
    cube.present[2, :, 0] = False  # m2 lacks o0.letter, the reference
    cube.present[1, :, 3] = False  # m1 lacks cloze_qa
    cube.bits[~cube.present] = False
    text = " ".join(render_text(report_of(cube, n_boot=20, k=5, n_random=5)).split())
    assert ("no cells at the reference o0.letter for m2: their pairs and decisions are "
            "empty; configs every model has: o0.paren, o1.letter (--reference picks one)") \
        in text
    assert "no cells at the reference" not in " ".join(
        render_text(report_of(random_cube(4, n_models=3, missing=0.0), n_boot=20, k=5,
                              n_random=5)).split())
