"""Sequential comparisons (issue 45): the confidence sequences' validity on small exact
cases, the stopping rule, the seeded order, and that a rerun over the same cells (a killed
run resumed) follows the same decision path."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fragility_tui.analysis.sequential import (WorBettingCS, item_order, run_sequential,
                                               settled, split_alpha, verdict_head)
from fragility_tui.harness.configs import CONFIG_IDS


def _miss_rate(values: np.ndarray, orders: np.ndarray, alpha: float,
               bet: str | None = None) -> float:
    """Share of orders (rows) in which the sequence ever excludes the pool's mean."""
    n_orders, n = orders.shape
    cs = WorBettingCS(np.full(n_orders, n), alpha, bet=bet)
    truth = values.mean()
    missed = np.zeros(n_orders, dtype=bool)
    rows = np.arange(n_orders)
    for t in range(n):
        cs.update(rows, values[orders[:, t]])
        lo, hi = cs.bounds()
        missed |= (lo > truth + 1e-12) | (hi < truth - 1e-12)
    return float(missed.mean()), cs


@pytest.mark.parametrize("bet", ["growth", "hedged"])
@pytest.mark.parametrize("d", [[1, 1, 1, 0, -1, 1, 0, 1],
                               [1, 1, 1, 1, 1, 1, 1, -1],
                               [0, 0, 0, 0, 1, -1, 0, 0]])
def test_every_order_of_a_tiny_pool_covers_with_probability_at_least_one_minus_alpha(d, bet):
    values = (np.array(d) + 1) / 2.0
    orders = np.array(list(itertools.permutations(range(len(d)))))  # all 40,320 orders
    alpha = 0.1
    rate, cs = _miss_rate(values, orders, alpha, bet)
    assert rate <= alpha  # exact: the uniform distribution over orders, no sampling error
    lo, hi = cs.bounds()  # the whole pool drawn: the sequence is the pool's mean
    assert np.allclose(lo, values.mean()) and np.allclose(hi, values.mean())


def test_simulated_orders_of_a_larger_pool_cover_and_shrink():
    rng = np.random.default_rng(3)
    values = (rng.choice([-1, 0, 1], size=120, p=[0.15, 0.6, 0.25]) + 1) / 2.0
    orders = np.array([rng.permutation(120) for _ in range(3000)])
    rate, cs = _miss_rate(values, orders, 0.05)
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 3000)
    # not vacuous: half-way through, the sequence is far narrower than [0, 1]
    half = WorBettingCS([120], 0.05)
    for t in range(60):
        half.update([0], values[orders[0, t:t + 1]])
    lo, hi = half.bounds()
    assert hi[0] - lo[0] < 0.35


@pytest.mark.parametrize("bet", ["growth", "hedged", "ons", "mixture"])
@pytest.mark.parametrize("finite", [True, False])
def test_updating_only_the_open_candidates_gives_the_bounds_of_updating_them_all(bet, finite):
    """A rejected candidate stays rejected, so WorBettingCS updates only the columns some of
    the rows still hold: the same bounds as betting on every candidate at every draw."""

    class Everything(WorBettingCS):
        def _open_window(self, rows):
            return slice(None)

    rng = np.random.default_rng(12)
    pools, alphas = np.array([60, 400, 900, 200]), np.array([0.05, 0.01, 0.0125, 0.1])
    data = [rng.choice([0, 0.5, 1], size=n, p=rng.dirichlet([1, 1, 1])) for n in pools]
    a, b = (cls(pools, alphas, finite=finite, bet=bet) for cls in (WorBettingCS, Everything))
    for t in range(pools.max()):
        rows = np.flatnonzero(pools > t)
        rows = rows[::2] if t % 5 == 2 else rows  # not every row at every draw
        x = np.array([data[r][a.n[r]] for r in rows if a.n[r] < pools[r]])
        rows = rows[a.n[rows] < pools[rows]]
        a.update(rows, x)
        b.update(rows, x)
        if t % 50 == 0:
            assert all(np.array_equal(u, v) for u, v in zip(a.bounds(), b.bounds()))
    assert all(np.array_equal(u, v) for u, v in zip(a.bounds(), b.bounds()))
    assert np.array_equal(a.rejected, b.rejected)


def test_an_unknown_bet_is_refused():
    with pytest.raises(ValueError, match="bet must be one of"):
        WorBettingCS([10], 0.05, bet="kelly")


def test_a_coarse_grid_still_covers():
    """Pools above GRID_POINTS/2 items use an even grid widened by a step: coverage holds
    on a pool whose mean falls between grid points (here without the zoom near Δ = 0, and
    with it below)."""
    rng = np.random.default_rng(5)
    values = (rng.choice([-1, 0, 1], size=60, p=[0.2, 0.5, 0.3]) + 1) / 2.0
    orders = np.array([rng.permutation(60) for _ in range(2000)])
    n_orders = len(orders)
    cs = WorBettingCS(np.full(n_orders, 60), 0.05, points=41, zoom=0)  # step 1/40 in x
    assert not cs.exact.any()
    missed = np.zeros(n_orders, dtype=bool)
    for t in range(60):
        cs.update(np.arange(n_orders), values[orders[:, t]])
        lo, hi = cs.bounds()
        missed |= (lo > values.mean() + 1e-12) | (hi < values.mean() - 1e-12)
    assert missed.mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / n_orders)
    zoomed = WorBettingCS([60], 0.05, points=41)  # the zoom: a step of 1/2000 near x = 1/2
    assert zoomed.grid.shape[1] > 400 and np.diff(zoomed.grid[0]).min() == pytest.approx(
        0.1 / 400)


def test_the_population_sequence_covers_the_population_mean_of_iid_draws():
    rng = np.random.default_rng(11)
    n_runs, n = 2000, 150
    draws = (rng.choice([-1, 0, 1], size=(n_runs, n), p=[0.2, 0.5, 0.3]) + 1) / 2.0
    truth = (0.3 - 0.2 + 1) / 2
    cs = WorBettingCS(np.full(n_runs, n), 0.05, points=401, finite=False)
    missed = np.zeros(n_runs, dtype=bool)
    for t in range(n):
        cs.update(np.arange(n_runs), draws[:, t])
        lo, hi = cs.bounds()
        missed |= (lo > truth) | (hi < truth)
    assert missed.mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / n_runs)
    assert np.median(hi - lo) < 0.2  # and it narrows
    # the population sequence never collapses at the pool's end as the pool's does (the
    # growth bets' running intersection leaves a few narrow ones: 5 of 2,000 under 0.05)
    assert np.all(hi - lo > 0.03) and np.mean(hi - lo > 0.05) > 0.99


def test_the_stopping_rule():
    m = 0.02
    assert settled(0.05, 0.001, 0.09, m) == "winner"
    assert settled(-0.05, -0.09, -0.001, m) == "winner"
    assert settled(0.01, 0.001, 0.03, m) is None  # excludes zero, below the margin
    assert settled(0.0, -0.015, 0.019, m) == "equivalent"
    assert settled(0.0, -0.021, 0.019, m) is None
    assert settled(0.03, -0.01, 0.07, m) is None
    assert settled(None, -1.0, 1.0, m) is None


def test_the_decision_gets_the_whole_alpha_and_the_readings_are_exploratory():
    """Issue 58: the decision's sequence, the only one the stopping rule reads, gets the
    whole alpha (alpha/2 before: this fails with the old split); the other configs (alpha/4
    together) and the other target (alpha/4) are readings outside it, labelled so."""
    a = split_alpha(0.05, 25)
    assert a["decision"] == pytest.approx(0.05)
    assert 25 * a["per_other_config"] == pytest.approx(0.0125)
    assert a["other_target"] == pytest.approx(0.0125)
    d, bench, ids = _pair(200, gap=0.1)
    r = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", chunk=50)
    assert r.alphas["decision"] == pytest.approx(0.05)
    out = r.to_json()
    assert out["alpha_split"] == a  # the keys kept
    assert out["guarantee"] == {
        "decision_alpha": pytest.approx(0.05),
        "exploratory": ["harness_sensitive", "other_target"],
        "harness_sensitive_alpha": pytest.approx(0.0125),
        "other_target_alpha": pytest.approx(0.0125),
        "simultaneous_alpha": pytest.approx(0.075)}
    assert all(s["other_target"]["exploratory"] and s["harness_sensitive_exploratory"]
               for s in out["path"])
    # the sequence the stopping rule reads is built at the whole alpha
    from fragility_tui.analysis.sequential import SequentialComparison

    comp = SequentialComparison(d, bench, CONFIG_IDS, "o0.letter")
    row = comp._slot[("lead", comp.ref)].rows[0]
    assert comp.cs.alpha[row] == pytest.approx(0.05)


def _null_draws(rng, runs, n, disc=0.25, gap=0.0):
    u = rng.random((runs, n))
    d = np.where(u < (disc + gap) / 2, 1, np.where(u < disc, -1, 0))
    return (d + 1) / 2.0


def test_the_decision_sequence_covers_and_rarely_names_a_winner_with_no_difference():
    """Fast version of benchmarks/sequential_sim.py --issue58's null scenario: 25% of items
    discordant, no difference, the decision's sequence at the whole alpha with the shipped
    bet (growth, prior draws, the grid's zoom), looked at after every chunk of 25: it
    excludes the truth in at most alpha of the runs, and names a winner (excludes zero
    with |Δ̂| >= 2 points) no more often."""
    rng = np.random.default_rng(58)
    runs, n, alpha = 400, 250, 0.05
    x = _null_draws(rng, runs, n)
    cs = WorBettingCS(np.full(runs, 3679), alpha, finite=False)
    missed = np.zeros(runs, dtype=bool)
    winner = np.zeros(runs, dtype=bool)
    rows = np.arange(runs)
    for t in range(n):
        cs.update(rows, x[:, t])
        if (t + 1) % 25:
            continue
        lo, hi = cs.bounds()
        lo_d, hi_d = 2 * lo - 1, 2 * hi - 1
        delta = 2 * cs.s / cs.n - 1
        missed |= (lo_d > 1e-12) | (hi_d < -1e-12)
        winner |= ((lo_d > 1e-9) & (delta >= 0.02)) | ((hi_d < -1e-9) & (delta <= -0.02))
    bound = alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)
    assert missed.mean() <= bound and winner.mean() <= bound
    assert np.median(hi - lo) < 0.12  # not vacuous: 250 draws narrow it to ±6 points of x


def test_the_shipped_sequences_settle_a_gap_sooner_than_the_old_ones():
    """The choice of issue 58, measured on the same pools and orders: a 10-point gap at 25%
    discordance settles on fewer items with the whole alpha, the growth bet's prior draws
    and the zoomed grid than with alpha/2 and the plain growth bet on the even grid (the
    sequences before issue 58), and every run names the right winner."""
    rng = np.random.default_rng(7)
    runs, n, gap = 200, 1200, 0.10
    x = _null_draws(rng, runs, n, gap=gap)

    def items_to_settle(alpha, **kw):
        cs = WorBettingCS(np.full(runs, n), alpha, finite=False, **kw)
        used = np.full(runs, n)
        active = np.ones(runs, dtype=bool)
        for t in range(n):
            rows = np.flatnonzero(active)
            if rows.size == 0:
                break
            cs.update(rows, x[rows, t])
            if (t + 1) % 25:
                continue
            lo, _ = cs.bounds()
            done = rows[(2 * lo[rows] - 1 > 1e-9) & (2 * cs.s[rows] / cs.n[rows] - 1 >= 0.02)]
            used[done] = t + 1
            active[done] = False
        return used, active

    new, open_new = items_to_settle(0.05)
    old, open_old = items_to_settle(0.025, zoom=0, prior=0)
    assert not open_new.any()
    assert np.median(new) < np.median(old) and new.mean() < 0.9 * old.mean()


def _pair(n_items=600, gap=0.0, seed=0, sizes=None):
    rng = np.random.default_rng(seed)
    sizes = sizes or [n_items // 4] * 4
    bench = np.repeat([f"b{k}" for k in range(len(sizes))], sizes)
    n = len(bench)
    item = rng.normal(0.3, 1, (n, 1))
    harness = rng.normal(0, 0.8, (n, len(CONFIG_IDS)))
    a = (item + harness + rng.normal(0, 1, harness.shape) + 2.5 * gap) > 0
    b = (item + harness + rng.normal(0, 1, harness.shape)) > 0
    ids = [f"{bb}/i{k}" for k, bb in enumerate(bench)]
    return a.astype(np.int8) - b.astype(np.int8), bench, ids


def test_a_large_gap_stops_early_with_the_right_winner_and_budgets_stop():
    d, bench, ids = _pair(800, gap=0.25)
    r = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", chunk=20)
    assert r.stop == "winner" and r.winner == 1 and r.items_used < 400
    assert r.final.lower > 0 and d[:, 0].mean() >= r.final.lower
    r = run_sequential(-d, bench, ids, CONFIG_IDS, "o0.letter", chunk=20)
    assert r.stop == "winner" and r.winner == -1
    r = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", chunk=20, max_items=40)
    assert r.stop == "budget" and r.items_used == 40


def test_identical_models_settle_as_equivalent_or_run_the_pool_out():
    d, bench, ids = _pair(1200)
    same = np.zeros_like(d)
    r = run_sequential(same, bench, ids, CONFIG_IDS, "o0.letter", chunk=100)
    assert r.stop == "equivalent" and r.items_used < 1200
    assert r.final.lower >= -0.02 - 1e-9 and r.final.upper <= 0.02 + 1e-9 and r.final.lower < 0
    mixed = np.zeros_like(d[:40])
    mixed[:10], mixed[10:20] = 1, -1  # pool Δ 0, too few items to settle before the end
    tiny = run_sequential(mixed, bench[:40], ids[:40], CONFIG_IDS, "o0.letter", chunk=25,
                          scope="pool")
    assert tiny.stop == "pool-exhausted" and tiny.items_used == 40
    assert tiny.settled == "equivalent" and tiny.winner is None
    assert tiny.final.lower == pytest.approx(0.0) and tiny.final.upper == pytest.approx(0.0)


def test_the_order_is_seeded_and_independent_of_the_row_order():
    d, bench, ids = _pair(200)
    o1 = item_order(bench, ids, 7, stratified=False)
    assert sorted(o1.tolist()) == list(range(200))
    assert np.array_equal(o1, item_order(bench, ids, 7, stratified=False))
    assert not np.array_equal(o1, item_order(bench, ids, 8, stratified=False))
    perm = np.random.default_rng(0).permutation(200)  # the store returns rows in any order
    o2 = item_order(bench[perm], [ids[k] for k in perm], 7, stratified=False)
    assert [ids[k] for k in o1] == [ids[perm[k]] for k in o2]


def test_the_stratified_order_keeps_every_prefix_in_proportion():
    d, bench, ids = _pair(sizes=[100, 50, 30, 20])
    order = item_order(bench, ids, 1, stratified=True)
    for prefix in (10, 37, 100, 150):
        counts = np.array([np.sum(bench[order[:prefix]] == f"b{k}") for k in range(4)])
        expected = prefix * np.array([100, 50, 30, 20]) / 200
        assert np.all(np.abs(counts - expected) <= 1)


def test_a_rerun_over_the_same_cells_follows_the_same_path_and_resumes_it():
    d, bench, ids = _pair(600, gap=0.06, seed=2)
    full = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", seed=3, chunk=30)
    again = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", seed=3, chunk=30)
    assert again.to_json() == full.to_json()
    # killed after 95 items in the seeded order (mid-chunk): the cells beyond are missing
    available = np.zeros(600, dtype=bool)
    available[full.order[:95]] = True
    part = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", seed=3, chunk=30,
                          available=available)
    assert part.stop == "awaiting-cells" and part.items_used == 90
    assert [s.to_json() for s in part.path] == [s.to_json() for s in full.path[:3]]
    available[:] = True  # the rerun brings the rest: the same decision path
    resumed = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", seed=3, chunk=30,
                             available=available)
    assert resumed.to_json() == full.to_json()


def test_the_balanced_target_uses_a_stratified_order_and_covers_its_truth():
    d, bench, ids = _pair(sizes=[200, 60, 40, 100], gap=0.1, seed=4)
    r = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", chunk=40, target="balanced",
                       scope="pool")
    truth = np.mean([d[bench == f"b{k}", 0].mean() for k in range(4)])
    assert r.target == "balanced"
    assert all(s.lower - 1e-12 <= truth <= s.upper + 1e-12 for s in r.path)
    observed = d[:, 0].mean()
    assert all(s.other_lower - 1e-12 <= observed <= s.other_upper + 1e-12 for s in r.path)


def test_the_live_driver_fed_chunk_by_chunk_follows_the_replay_path():
    """SequentialRun as commands/compare_live.py drives it: d starts empty, each chunk's
    rows arrive (set_row) as its cells are stored, advance judges it; the path, stop and
    winner are the replay's over the full cells, and a budget stop says which budget."""
    from fragility_tui.analysis.sequential import SequentialRun

    d, bench, ids = _pair(800, gap=0.25)
    full = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", chunk=20)
    assert full.stop == "winner" and full.budget is None
    live = SequentialRun(np.zeros_like(d), bench, ids, CONFIG_IDS, "o0.letter", chunk=20)
    available = np.zeros(len(ids), dtype=bool)
    assert live.advance(available) == [] and not live.done
    while not live.done:
        nxt = live.next_chunk()
        for i in nxt.tolist():
            live.set_row(i, d[i])
        available[nxt] = True
        assert len(live.advance(available)) == 1
    assert live.result.to_json() == full.to_json()
    assert live.next_chunk().size == 0
    live = SequentialRun(d, bench, ids, CONFIG_IDS, "o0.letter", chunk=20)
    live.advance(np.isin(np.arange(len(ids)), live.order[:40]))
    assert live.stop("budget", "max-seconds").to_json()["budget"] == "max-seconds"
    assert live.result.items_used == 40 and live.done
    capped = run_sequential(d, bench, ids, CONFIG_IDS, "o0.letter", chunk=20, max_items=30)
    assert capped.stop == "budget" and capped.to_json()["budget"] == "max-items"


def test_the_verdict_in_words_names_the_winner_and_the_scope():
    names = ("model-a", "model-b")
    assert verdict_head(1, "winner", "winner", 2, "population", names) == "winner model-a"
    assert verdict_head(-1, "winner", "winner", 2, "pool", names) == "winner model-b on this pool"
    assert (verdict_head(0, "equivalent", "equivalent", 2.5, "population", names)
            == "equivalent within ±2.5 points")
    # a budget that ran out on an equivalent reading still says what was settled
    assert verdict_head(0, "equivalent", "budget", 2, "pool", names) == \
        "equivalent within ±2 points on this pool"
    assert verdict_head(0, None, "pool-exhausted", 2, "population", names) == "not settled"
