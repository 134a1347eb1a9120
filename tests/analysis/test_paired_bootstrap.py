"""The report's speed-ups compute the same numbers, bit for bit (issue 43 item 8): blocked
resampling counts, counts drawn once and reused, the complete-cube shortcuts, compression's
subsets sorted at once, the one-pass canonical-order check."""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.analysis.itemstats import resample_counts, rng_for
from fragility_tui.analysis.paired_bootstrap import (Resamples, bootstrap_counts,
                                                     complete_estimates, point_counts,
                                                     strata_of, target_estimates)
from fragility_tui.grid.simulate import simulate_cube


def _reference_counts(rng, n, rows, dtype):
    """resample_counts as it was: one bincount over every row."""
    small = np.uint16 if n <= np.iinfo(np.uint16).max else np.int64
    draws = rng.integers(0, n, size=(rows, n), dtype=small).astype(np.intp)
    draws += np.arange(rows, dtype=np.intp)[:, None] * n
    return np.bincount(draws.ravel(), minlength=rows * n).reshape(rows, n).astype(dtype)


@pytest.mark.parametrize("n, rows", [(1, 3), (7, 500), (3679, 40), (70_000, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocked_counts_are_the_one_bincount_counts(n, rows, dtype):
    got = resample_counts(rng_for(3, 1), n, rows, dtype)
    want = _reference_counts(rng_for(3, 1), n, rows, dtype)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def _cube(complete: bool):
    cube = simulate_cube(6, 160, seed=4)
    if complete:
        return cube
    present = cube.present.copy()
    present[np.random.default_rng(0).random(present.shape) < 0.1] = False
    return type(cube)(cube.models, cube.items, cube.configs, cube.bits & present, present,
                      cube.benchmarks, cube.subjects, cube.reference, cube.near_tie)


@pytest.mark.parametrize("complete", [True, False])
def test_counts_reused_for_a_second_set_of_columns_equal_fresh_draws(complete):
    cube = _cube(complete)
    strata = strata_of(cube)
    cols = np.array([(0, 1, 0), (2, 3, 5), (4, 5, 25), (1, 0, 3)], dtype=np.intp)
    resamples = Resamples(strata, 700, 9)
    first = bootstrap_counts(cube, strata, cols[:2], 700, 9, resamples)
    second = bootstrap_counts(cube, strata, cols[2:], 700, 9, resamples)
    fresh = bootstrap_counts(cube, strata, cols, 700, 9)
    for k in (0, 1):
        assert np.array_equal(np.concatenate([first[k], second[k]], axis=2), fresh[k])


def test_point_counts_of_a_complete_cube_take_the_per_model_shortcut_exactly():
    cube = _cube(True)
    strata = strata_of(cube)
    a, b = np.array([0, 2, 5, 1]), np.array([1, 3, 4, 1])
    num, den = point_counts(cube, strata, a, b)
    paired = cube.present[a] & cube.present[b]  # the general path, by hand
    for s, (lo, hi) in enumerate(zip(strata.starts, strata.stops)):
        want = ((cube.bits[a] & paired)[:, lo:hi].sum(axis=1)
                - (cube.bits[b] & paired)[:, lo:hi].sum(axis=1))
        assert np.array_equal(num[:, s], want)
        assert np.array_equal(den[:, s], paired[:, lo:hi].sum(axis=1))


def test_complete_estimates_equal_target_estimates_bit_for_bit():
    rng = np.random.default_rng(2)
    sizes = np.array([300, 12, 41, 5])
    num = rng.integers(-12, 13, size=(4, 500, 30)).astype(np.float32)
    den = np.broadcast_to(sizes[:, None, None], num.shape).astype(np.float32)
    supported = rng.random((4, 1, 30)) < 0.8
    supported[:, :, 0] = False  # a column no benchmark supports
    want = target_estimates(num, den, supported)
    got = complete_estimates(num, sizes, supported)
    for t in want:
        assert got[t].shape == want[t].shape
        assert got[t].tobytes() == want[t].tobytes(), t


def test_the_pooled_share_interval_gathers_the_same_integers_the_counts_gave():
    from fragility_tui.analysis import pooled_share
    from fragility_tui.analysis.basis import measure
    from fragility_tui.analysis.itemstats import STREAM_POOLED_SHARE
    from fragility_tui.analysis.pairs import adjacent_pairs

    basis = measure(simulate_cube(8, 400, seed=5))
    cube, cls = basis.cube, basis.classification
    pairs = adjacent_pairs(cube, basis.accuracy)
    got = pooled_share.pooled_share_ci(cube, pairs, cls, n_boot=900, seed=2)
    # as it was: the counts of each resample times the two integer columns, in float32
    ref = cube.reference_index
    d_sum, f_sum = np.zeros(len(cube.items)), np.zeros(len(cube.items))
    for a, b in pairs:
        d = cube.bits[a, :, ref].astype(np.int64) - cube.bits[b, :, ref]
        if d.sum():
            d_sum += d
            f_sum += d * (cls.complete[a] & cls.complete[b] & ~(cls.robust[a] & cls.robust[b]))
    rng, n, rows = rng_for(2, STREAM_POOLED_SHARE), len(d_sum), max(1, 2_000_000 // len(d_sum))
    both = np.stack([f_sum, d_sum], axis=1).astype(np.float32)
    shares = []
    for start in range(0, 900, rows):
        num, den = (resample_counts(rng, n, min(rows, 900 - start), np.float32) @ both
                    ).astype(np.float64).T
        shares.append(num[den != 0] / den[den != 0])
    want = tuple(float(x) for x in np.percentile(np.concatenate(shares), [2.5, 97.5]))
    assert got == want


def test_compression_subsets_sorted_at_once_are_the_ones_drawn_one_by_one():
    from fragility_tui.analysis.itemstats import random_subsets, tie_draws, top_k

    got = random_subsets(500, 40, 60, rng_for(3, 3))
    rng = rng_for(3, 3)
    want = np.stack([np.sort(rng.choice(500, size=40, replace=False)) for _ in range(60)])
    assert got.tobytes() == want.tobytes()
    values = np.repeat(np.arange(50.0), 4)  # ties of four at every value, the cut's too
    top = top_k(values, 10)
    assert len(top.above) == 8 and top.slots == 2 and not top.deterministic
    got = tie_draws(top, 30, rng_for(3, 2))
    rng = rng_for(3, 2)
    want = np.stack([np.sort(np.concatenate([top.above, rng.choice(top.tie_band, size=2,
                                                                   replace=False)]))
                     for _ in range(30)])
    assert got.tobytes() == want.tobytes()
    whole_band = top_k(values, 12)  # the cut at a band's end: nothing drawn
    assert tie_draws(whole_band, 30, rng_for(3, 2)).tolist() == [sorted(range(188, 200))]


def test_a_cube_already_in_canonical_order_is_recognised_and_any_other_sorted():
    from fragility_tui.grid.canonical import canonical_order, reordered

    cube = simulate_cube(5, 90, seed=1)
    assert canonical_order(cube) is None
    rng = np.random.default_rng(0)
    m, i = rng.permutation(5), rng.permutation(90)
    shuffled = reordered(cube, m, i)
    m_back, i_back = canonical_order(shuffled)
    assert (m[m_back] == np.arange(5)).all() and (i[i_back] == np.arange(90)).all()


def test_decisions_do_not_depend_on_how_many_columns_are_bootstrapped_at_once(monkeypatch):
    from fragility_tui.analysis import decisions

    cube = simulate_cube(6, 300, seed=9)
    pairs = [(cube.models[k], cube.models[k + 1]) for k in range(5)]
    default = decisions.decide_pairs(cube, pairs, n_boot=200, adjacent=[True] * 5)
    monkeypatch.setattr(decisions, "_COLS_PER_BLOCK", 7)
    assert decisions.decide_pairs(cube, pairs, n_boot=200, adjacent=[True] * 5) == default
