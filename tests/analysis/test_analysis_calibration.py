"""Verdict calibration (analysis/calibration.py): the matched generator's expectations, the
truths of the two harness-kept scenarios (calibration_truths.py), the vectorised tallies
against one cube per replicate, the family line, rates with intervals, and the cache key."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_grids import make_cube

from fragility_tui.analysis import calibration as cal
from fragility_tui.analysis import calibration_truths as truths
from fragility_tui.analysis.classify import classify, config_accuracy
from fragility_tui.analysis.decisions import TARGETS, canonical, decide_pairs
from fragility_tui.analysis.pairs import adjacent_pairs, gap_splits
from fragility_tui.grid.cube import Cube

CONFIGS = ("o0.letter", "o0.paren", "o1.letter", "cloze_qa")


def random_cube(seed: int, n_items=(7, 5), missing: float = 0.1) -> Cube:
    """Three models, two benchmarks, four configs; correlated bits (a shared item
    easiness), some cells missing."""
    rng = np.random.default_rng(seed)
    benchmarks = [b for b, n in zip(("b1", "b2"), n_items) for _ in range(n)]
    easy = rng.random(len(benchmarks))
    rows = {}
    for m, skill in zip(("m1", "m2", "m3"), (0.2, 0.0, -0.1)):
        p = np.clip(easy[:, None] + skill + 0.3 * (rng.random((len(benchmarks), 4)) - 0.5), 0, 1)
        bits = rng.random(p.shape) < p
        gone = rng.random(p.shape) < missing
        rows[m] = ["".join("." if g else "1" if b else "0" for b, g in zip(br, gr))
                   for br, gr in zip(bits, gone)]
    return make_cube(rows, benchmarks, CONFIGS)


def simulated_accuracy(cube, a, b, exchange, replicates=4000, seed=1):
    """[R, 2, C] per-config accuracies (over present cells) of the simulated A and B."""
    canon = canonical(cube)
    i, j = canon.models.index(a), canon.models.index(b)
    idx, swap = cal.draw_replicates(canon, replicates, np.random.default_rng(seed))
    sim = cal.simulated_cube(canon, i, j, idx, swap, exchange)
    acc = config_accuracy(sim).accuracy.reshape(replicates, 2, -1)
    return canon, acc


def test_draws_stay_inside_each_benchmark():
    cube = canonical(random_cube(0, n_items=(6, 3)))
    idx, swap = cal.draw_replicates(cube, 50, np.random.default_rng(0))
    assert idx.shape == swap.shape == (50, 9)
    assert ((idx[:, :6] >= 0) & (idx[:, :6] < 6)).all() and ((idx[:, 6:] >= 6) & (idx[:, 6:] < 9)).all()
    assert 0.3 < swap.mean() < 0.7


def test_real_gap_scenario_keeps_each_model_and_the_observed_gap_in_expectation():
    cube = make_cube({"A": ["11", "10", "01", "00", "11", "10"],
                      "B": ["10", "00", "01", "00", "01", "00"]},
                     ["b1", "b1", "b1", "b2", "b2", "b2"], ("o0.letter", "cloze_qa"))
    canon, acc = simulated_accuracy(cube, "A", "B", False)
    observed = config_accuracy(canon).accuracy  # [2, C]
    se = acc.std(axis=0) / np.sqrt(len(acc))
    assert np.all(np.abs(acc.mean(axis=0) - observed) <= 4 * se + 1e-12)
    result = cal.calibrate_pair(canon, "A", "B", replicates=4000, n_boot=20)
    observed_gap = gap_splits(canon, [(0, 1)])[0].gap
    assert observed_gap == 3
    assert result[cal.REPRODUCIBILITY]["mean_gap"] == pytest.approx(observed_gap, abs=0.1)
    assert result[cal.REPRODUCIBILITY]["true_gap_points"] == pytest.approx(100 * 3 / 6)


def test_no_gap_scenario_gives_both_models_one_profile():
    cube = random_cube(3, n_items=(30, 20), missing=0.0)
    canon, acc = simulated_accuracy(cube, "m1", "m3", True)
    observed = config_accuracy(canon).accuracy
    i, j = canon.models.index("m1"), canon.models.index("m3")
    assert (observed[i] - observed[j]).max() > 0.1  # a real gap in the grid itself
    mixture = (observed[i] + observed[j]) / 2
    se = acc.std(axis=0) / np.sqrt(len(acc))
    for side in range(2):
        assert np.all(np.abs(acc[:, side].mean(axis=0) - mixture) <= 4 * se[side] + 1e-12)
    result = cal.calibrate_pair(canon, "m1", "m3", replicates=2000, n_boot=20)
    assert abs(result[cal.EXCHANGEABLE]["mean_gap"]) < 1.0
    assert result[cal.REPRODUCIBILITY]["mean_gap"] > 3


def test_the_swap_keeps_each_drawn_item_pair_of_rows():
    cube = canonical(random_cube(4))
    idx, swap = cal.draw_replicates(cube, 30, np.random.default_rng(2))
    real = cal.simulated_cube(cube, 0, 1, idx, swap, False)
    none = cal.simulated_cube(cube, 0, 1, idx, swap, True)
    r_a, r_b, n_a, n_b = real.bits[0::2], real.bits[1::2], none.bits[0::2], none.bits[1::2]
    s = swap[..., None]
    assert (np.where(s, r_b, r_a) == n_a).all() and (np.where(s, r_a, r_b) == n_b).all()
    assert (real.bits[0::2] == cube.bits[0][idx]).all()


def one_replicate_cube(canon: Cube, i: int, j: int, idx_row, swap_row, exchange) -> Cube:
    """One replicate, built item by item (no stacking, no shared gathers)."""
    n_items, n_configs = len(canon.items), len(canon.configs)
    bits = np.zeros((2, n_items, n_configs), dtype=bool)
    present = np.zeros_like(bits)
    for k in range(n_items):
        src = int(idx_row[k])
        first, second = (j, i) if exchange and swap_row[k] else (i, j)
        bits[0, k], present[0, k] = canon.bits[first, src], canon.present[first, src]
        bits[1, k], present[1, k] = canon.bits[second, src], canon.present[second, src]
    return Cube(("A", "B"), canon.items, canon.configs, bits, present, canon.benchmarks,
                None, canon.reference)


@pytest.mark.parametrize("seed, missing", [(0, 0.1), (1, 0.1), (2, 0.0)])
def test_tallies_equal_a_count_over_one_cube_per_replicate(seed, missing):
    cube = random_cube(seed, missing=missing)  # complete pairs take another path
    canon = canonical(cube)
    replicates, n_boot = 25, 40
    result = cal.calibrate_pair(canon, "m2", "m1", replicates=replicates, seed=seed,
                                n_boot=n_boot)
    i, j = canon.models.index("m1"), canon.models.index("m2")  # simulated in name order
    idx, swap = cal.draw_replicates(canon, replicates, cal.pair_rng(seed, "m1", "m2"))
    scenario_truths = cal.scenario_truths(canon, i, j, 2.0, seed)
    for scenario in cal.SCENARIOS:
        truth, exchange, _ = scenario_truths[scenario]
        verdicts = dict.fromkeys(cal.VERDICTS, 0)
        labels = {t: dict.fromkeys(cal.LABELS, 0) for t in TARGETS}
        manufactured, gaps = 0, []
        for r in range(replicates):
            one = one_replicate_cube(truth, 0, 1, idx[r], swap[r], exchange)
            split = gap_splits(one, [(0, 1)])[0]
            verdicts[split.verdict] += 1
            manufactured += split.manufactured
            gaps.append(split.gap)
            for d in decide_pairs(one, [("A", "B")], seed=seed, n_boot=n_boot):
                labels[d.target][d.label] += 1
        tally = result[scenario]
        assert tally["verdicts"] == verdicts
        assert tally["manufactured"] == manufactured
        assert tally["labels"] == labels
        assert tally["mean_gap"] == pytest.approx(-np.mean(gaps))  # oriented m2 above m1
        assert sum(verdicts.values()) == replicates


def test_tallies_do_not_depend_on_pair_order_or_on_other_pairs():
    cube = canonical(random_cube(5))
    ab = cal.calibrate_pair(cube, "m1", "m2", replicates=20, n_boot=20)
    ba = cal.calibrate_pair(cube, "m2", "m1", replicates=20, n_boot=20)
    assert cal.oriented(ba, "m1", "m2") == ab
    alone = cal.calibrate(cube, [("m1", "m2")], replicates=20, n_boot=20)["pairs"][0]
    with_others = cal.calibrate(cube, [("m3", "m2"), ("m1", "m2")], replicates=20,
                                n_boot=20)["pairs"][1]
    assert alone == with_others


def test_calibrate_reuses_cached_tallies_and_reports_the_observed_outcomes():
    cube = random_cube(6)
    first = cal.calibrate(cube, replicates=10, n_boot=20)
    adjacent = [(cube.models[i], cube.models[j]) for i, j in adjacent_pairs(cube)]
    assert [(p["a"], p["b"]) for p in first["pairs"]] == adjacent and len(adjacent) == 2
    assert set(first["new"]) == {cal.pair_key(p["a"], p["b"]) for p in first["pairs"]}
    again = cal.calibrate(cube, replicates=10, n_boot=20, cached=first["new"])
    assert again["new"] == {} and again["pairs"] == first["pairs"]
    canon = canonical(cube)
    for p in first["pairs"]:
        pos = canon.models.index
        split = gap_splits(canon, [(pos(p["a"]), pos(p["b"]))])[0]
        assert p["observed"]["verdict"] == split.verdict and p["observed"]["gap"] == split.gap
        assert p["adjacent"] is True
    assert first["totals"]["replicates"] == 20
    assert first["settings"] == {"method_version": cal.METHOD_VERSION, "reference": "o0.letter",
                                 "replicates": 10, "seed": 0, "n_boot": 20,
                                 "margin_points": 2.0, "interval": "wilson_95"}
    # the cached counts changed shape with the scenarios, then SPEC v4, then the truths'
    # harness reversals (so that only errors under a truth are false alarms)
    assert cal.METHOD_VERSION == 4
    assert set(first["scenarios"]) == {*cal.SCENARIOS, cal.FAMILY}


def test_cache_key_follows_content_reference_and_settings():
    cube = random_cube(7)
    settings = cal.settings(cube, replicates=10)
    key = cal.cache_key(cube, settings)
    shuffled = cube.select(models=["m3", "m1", "m2"])  # same content, another order
    assert cal.cache_key(shuffled, settings) == key
    flipped = np.array(cube.bits)
    flipped[0, 0, 1] = ~flipped[0, 0, 1]
    changed = Cube(cube.models, cube.items, cube.configs, flipped, cube.present | True,
                   cube.benchmarks)
    assert cal.cache_key(changed, settings) != key
    other_ref = cube.with_reference("cloze_qa")
    assert cal.cache_key(other_ref, cal.settings(other_ref, replicates=10)) != key
    assert cal.cache_key(cube, cal.settings(cube, replicates=11)) != key
    assert cal.cache_key(cube, cal.settings(cube, replicates=10, seed=1)) != key


def test_the_pane_line_names_its_scenarios_and_fits_78_columns_for_every_outcome():
    tally = {"verdicts": dict.fromkeys(cal.VERDICTS, 9999), "manufactured": 9999,
             "labels": {t: dict.fromkeys(cal.LABELS, 9999) for t in TARGETS}, "mean_gap": 0.0,
             "true_gap_points": 0.0, "shortfall_items": 1}  # truth not reached: not judged
    result = cal.rated({"a": "x", "b": "y", "replicates": 9999,
                        **{s: tally for s in cal.SCENARIOS}})
    for outcome in (*cal.VERDICTS, "manufactured"):
        line = cal.summary_line(result, outcome)
        assert len(line) <= 78 and "obs" in line and "no gap" in line and "exch" in line
    for target in TARGETS:
        for label in cal.LABELS:
            line = cal.summary_line(result, label, target)
            assert len(line) <= 78 and f"'{label}'" in line and "100%" in line
            assert "obs" in line and "no gap" in line and "harness" in line
    wide = cal.summary_line(result, "manufactured", width=160)
    # `manufactured` is the correct call where the truth has no gap: not a false alarm
    assert wide == ("calibration (9999 replicates): 'manufactured' 100% [100, 100] "
                    "reproduced at the observed gap; 100% [100, 100] with no gap, "
                    "rows exchanged")
    wide = cal.summary_line(result, "stable", "observed", width=160)
    assert wide.endswith("reproduced at the observed gap; 100% [100, 100] with no gap, "
                         "harness kept")  # false alarms: test_calibration_false_alarms.py


def test_the_pane_line_quotes_the_rates_of_its_two_scenarios():
    cube = random_cube(9, n_items=(40, 30), missing=0.0)
    result = cal.calibrate(cube, replicates=40, n_boot=30)["pairs"][0]
    verdict = result["observed"]["verdict"]
    line = cal.summary_line(result, verdict, width=200)
    rep = result[cal.REPRODUCIBILITY]["verdicts"][verdict]
    null = result[cal.EXCHANGEABLE]["verdicts"][verdict]
    assert f"{100 * rep['rate']:.0f}% [" in line.split("reproduced")[0]
    assert f"; {100 * null['rate']:.0f}% [" in line and "rows exchanged" in line
    label = result["observed"]["labels"]["observed"]
    line = cal.summary_line(result, label, "observed", width=200)
    rep = result[cal.REPRODUCIBILITY]["labels"]["observed"][label]
    null = result[cal.HARNESS_KEPT]["labels"]["observed"][label]
    assert f"{100 * rep['rate']:.0f}% [" in line.split("reproduced")[0]
    assert f"; {100 * null['rate']:.0f}% [" in line


def test_a_grid_without_adjacent_pairs_calibrates_to_nothing():
    cube = make_cube({"only": ["1111", "0000"]}, ["b1", "b1"], CONFIGS)
    result = cal.calibrate(cube, replicates=5, n_boot=10)
    assert result["pairs"] == [] and result["totals"]["replicates"] == 0


def test_classification_moves_with_the_rows():
    """The tallies gather class codes instead of reclassifying: the same thing."""
    cube = canonical(random_cube(8))
    idx, swap = cal.draw_replicates(cube, 10, np.random.default_rng(3))
    for exchange in (False, True):
        sim = cal.simulated_cube(cube, 0, 2, idx, swap, exchange)
        cls = classify(cube)
        codes = cal.stacked_rows(cls.codes[0], cls.codes[2], idx, swap, exchange)
        assert (classify(sim).codes == codes.reshape(len(sim.models), -1)).all()


def robust_cube(seed: int, n_items=(60, 40)) -> Cube:
    """Two models with many robust rows (a strong item effect shared by the configs) and a
    harness effect of their own: A loses under cloze_qa, B gains under o1.letter."""
    rng = np.random.default_rng(seed)
    n = sum(n_items)
    benchmarks = [b for b, k in zip(("b1", "b2"), n_items) for _ in range(k)]
    rows = {}
    for m, skill, effect in (("A", 0.25, (0, 0, 0, -0.3)), ("B", 0.0, (0, 0, 0.3, 0))):
        easy = rng.random(n) + skill
        p = np.clip(np.where(easy[:, None] > 0.6, 0.97, 0.05) + np.array(effect), 0, 1)
        bits = rng.random((n, 4)) < p
        rows[m] = ["".join("1" if b else "0" for b in r) for r in bits]
    return make_cube(rows, benchmarks, CONFIGS)


def per_config_counts(pair: Cube) -> np.ndarray:
    """[2, S, C] correct cells per model, benchmark and config."""
    strata = [(0, 60), (60, 100)]
    return np.stack([[pair.bits[m, lo:hi].sum(axis=0) for lo, hi in strata] for m in (0, 1)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_harness_kept_truth_has_no_reference_gap_and_each_models_own_pattern(seed):
    pair = truths.pair_cube(canonical(robust_cube(seed)), 0, 1)
    gaps, _ = truths.reference_gaps(pair)
    assert gaps.sum() > 5  # A is ahead in the grid itself
    truth, shortfall = truths.shifted_truth(pair, np.zeros(2, dtype=np.int64),
                                            np.random.default_rng(seed))
    assert shortfall == 0
    assert (truths.reference_gaps(truth)[0] == 0).all()  # per benchmark: both targets
    before, after = per_config_counts(pair), per_config_counts(truth)
    ref = pair.reference_index
    # every config of a model moved by the same count: acc_c − acc_ref kept exactly
    moved = after - before
    assert (moved == moved[..., [ref]]).all()
    assert ((after - after[..., [ref]]) == (before - before[..., [ref]])).all()
    assert (truth.present == pair.present).all()
    changed = (truth.bits != pair.bits).any(axis=2)
    assert changed.sum() == gaps[0] + gaps[1]  # one whole row per item of gap
    assert (truth.bits[changed].all(axis=1) | ~truth.bits[changed].any(axis=1)).all()


def test_margin_truth_has_a_gap_of_the_margin_in_the_observed_direction():
    pair = truths.pair_cube(canonical(robust_cube(4)), 0, 1)
    targets = truths.margin_targets(pair, 5.0)
    assert list(targets) == [3, 2]  # round(5% of 60), round(5% of 40)
    truth, shortfall = truths.shifted_truth(pair, targets, np.random.default_rng(0))
    assert shortfall == 0 and list(truths.reference_gaps(truth)[0]) == [3, 2]
    assert truths.truth_gap_points(truth) == pytest.approx(5.0)
    flipped = truths.pair_cube(canonical(robust_cube(4)), 1, 0)
    assert list(truths.margin_targets(flipped, 5.0)) == [-3, -2]


def test_too_few_robust_rows_is_reported_as_a_shortfall():
    cube = make_cube({"A": ["1010"] * 5 + ["1111"], "B": ["0101"] * 5 + ["1111"]},
                     ["b1"] * 6, CONFIGS)  # gap 5 at the reference, one robust row each
    pair = truths.pair_cube(canonical(cube), 0, 1)
    truth, shortfall = truths.shifted_truth(pair, np.zeros(1, dtype=np.int64),
                                            np.random.default_rng(0))
    assert shortfall == 4 and truths.reference_gaps(truth)[0][0] == 4
    counts = cal.calibrate_pair(canonical(cube), "A", "B", replicates=5, n_boot=10)
    assert counts[cal.HARNESS_KEPT]["shortfall_items"] == 4
    assert counts[cal.HARNESS_KEPT]["true_gap_points"] == pytest.approx(100 * 4 / 6)


def test_power_and_false_alarm_scenarios_tell_a_gap_from_none():
    cube = robust_cube(5, n_items=(600, 400))
    result = cal.calibrate(cube, replicates=40, n_boot=100, margin=2.0)["pairs"][0]
    assert result[cal.HARNESS_KEPT]["true_gap_points"] == pytest.approx(0.0)
    assert abs(result[cal.HARNESS_KEPT]["mean_gap"]) < 5
    assert result[cal.POWER]["true_gap_points"] == pytest.approx(2.0, abs=0.05)
    stable = {s: result[s]["labels"]["observed"]["stable"] for s in cal.SCENARIOS}
    assert stable[cal.REPRODUCIBILITY]["rate"] > 0.9  # a large real gap
    assert stable[cal.EXCHANGEABLE]["rate"] < 0.2 and stable[cal.HARNESS_KEPT]["rate"] < 0.2
    for r in stable.values():
        assert r["ci_low"] <= r["rate"] <= r["ci_high"] and r["n"] == 40


def test_family_line_counts_how_often_the_null_largest_gap_reaches_the_observed():
    far = make_cube({"m1": ["1111"] * 30, "m2": ["0000"] * 30, "m3": ["0000"] * 30},
                    ["b1"] * 30, CONFIGS)
    fam = cal.calibrate(far, replicates=50, n_boot=10)[cal.FAMILY]
    assert fam["pairs"] == 2 and fam["observed_largest_gap_points"] == pytest.approx(100.0)
    # the null flips a coin per item: a 100-point gap needs every coin alike
    assert fam["at_least_observed"]["count"] == 0 and fam["at_least_observed"]["n"] == 50
    same = random_cube(10, n_items=(30, 20), missing=0.0)
    twins = Cube(("t1", "t2", "t3"), same.items, same.configs,
                 np.repeat(same.bits[:1], 3, axis=0), same.present, same.benchmarks)
    result = cal.calibrate(twins, replicates=50, n_boot=10)
    fam = result[cal.FAMILY]
    assert fam["observed_largest_gap_points"] == 0.0
    assert fam["at_least_observed"]["count"] == 50  # zero is always reached
    assert [p["family_exceed"]["count"] for p in result["pairs"]] == [50, 50]
    named = cal.calibrate(twins, [("t1", "t2")], replicates=5, n_boot=10)
    assert named[cal.FAMILY] is None and "family_exceed" not in named["pairs"][0]
