"""SPEC v3 §9: `harness-sensitive` must not cry wolf on grids where no pair differs anywhere.

Exchangeable models: every model draws its bits from the same per-(item, config)
probabilities, which carry real harness effects (a shift per config and an item × config
interaction) shared by all models. No pair differs in any config, so every
`harness-sensitive` decision is a false alarm. Issue 20 measured 50 of 114 adjacent-pair
decisions flagged under SPEC v1 (one 95% interval per config, 25 other configs); v3 judges
the other configs with simultaneous intervals and must stay at or below 10%.
"""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.analysis import harness_family
from fragility_tui.analysis.decisions import decide_pairs, percentile_ci
from fragility_tui.analysis.pairs import adjacent_pairs
from fragility_tui.grid.cube import Cube
from fragility_tui.harness.configs import CONFIG_IDS

SEEDS = (1, 2, 3)
BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa")


def exchangeable_grid(seed: int, n_models: int = 20, n_items: int = 1000) -> Cube:
    rng = np.random.default_rng([seed, 20])
    n_configs = len(CONFIG_IDS)
    easiness = rng.normal(0.8, 1.3, n_items)[:, None]
    config_shift = rng.normal(0.0, 0.5, n_configs)[None, :]
    interaction = rng.normal(0.0, 1.0, (n_items, n_configs))  # items flip across configs
    p = 1.0 / (1.0 + np.exp(-(easiness + config_shift + interaction)))
    bits = rng.random((n_models, n_items, n_configs)) < p  # the same p for every model
    bench = np.array([BENCHMARKS[i % 4] for i in range(n_items)], dtype=object)
    return Cube(tuple(f"m{k:02d}" for k in range(n_models)),
                tuple(f"{bench[i]}/{i}" for i in range(n_items)), tuple(CONFIG_IDS), bits,
                np.ones_like(bits), bench)


def harness_sensitive_count() -> tuple[int, int]:
    """(decisions flagged harness-sensitive, adjacent-pair decisions) over the three seeds,
    both targets, SPEC defaults (2,000 resamples, margin 2 points)."""
    flagged = total = 0
    for seed in SEEDS:
        cube = exchangeable_grid(seed)
        pairs = [(cube.models[a], cube.models[b]) for a, b in adjacent_pairs(cube)]
        out = decide_pairs(cube, pairs, seed=0, adjacent=[True] * len(pairs))
        flagged += sum("harness-sensitive" in d.flags for d in out)
        total += len(out)
    return flagged, total


def test_harness_sensitive_rarely_fires_on_exchangeable_models(monkeypatch):
    flagged, total = harness_sensitive_count()
    assert total == 3 * 19 * 2
    assert flagged <= 0.10 * total, f"{flagged} of {total} decisions flagged"

    # The same grids under v1's rule (each config's own percentile interval) flag far more:
    # the grids do carry harness effects that can fool a per-config test, so the bound
    # above is a property of the simultaneous intervals, not of an easy grid.
    monkeypatch.setattr(harness_family, "max_t_band",
                        lambda samples, point, *a, **kw: percentile_ci(samples))
    v1_flagged, _ = harness_sensitive_count()
    assert v1_flagged >= 0.3 * total and v1_flagged >= 3 * max(flagged, 1)


def full_family_harness(cube, pairs, seed, n_boot, m):
    """§9 v3 read plainly: bootstrap every (pair, config) column, and for each decision
    judge every other config with the max-|t| band over all of them (no screening)."""
    from fragility_tui.analysis.decisions import (TARGETS, bootstrap_counts, canonical,
                                                  point_counts, strata_of, target_estimates)
    from fragility_tui.analysis.harness_family import opposite_winners, sign

    cube = canonical(cube)
    strata = strata_of(cube)
    a_idx = np.array([cube.models.index(a) for a, _ in pairs])
    b_idx = np.array([cube.models.index(b) for _, b in pairs])
    num, den = point_counts(cube, strata, a_idx, b_idx)
    point = target_estimates(num.transpose(1, 0, 2), den.transpose(1, 0, 2),
                             (den > 0).transpose(1, 0, 2))
    n_c = len(cube.configs)
    cols = np.array([(a, b, c) for a, b in zip(a_idx, b_idx) for c in range(n_c)])
    bnum, bden = bootstrap_counts(cube, strata, cols, n_boot, seed)
    sup = np.stack([den[p, :, c] > 0 for p in range(len(pairs)) for c in range(n_c)], axis=1)
    samples = target_estimates(bnum, bden, sup[:, None, :])
    c0 = cube.reference_index
    out = {}
    for p in range(len(pairs)):
        others = [c for c in range(n_c) if c != c0 and np.isfinite(point["observed"][p, c])]
        for t in TARGETS:
            s0 = sign(float(point[t][p, c0]))
            hits = ()
            if s0 and others:
                ks = [p * n_c + c for c in others]
                hit = opposite_winners(samples[t][:, ks], point[t][p, others], s0, m)
                hits = tuple(cube.configs[c] for c, h in zip(others, hit) if h)
            out[(pairs[p], t)] = hits
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_screened_family_equals_the_full_family(seed):
    """decide_pairs bootstraps the whole family only for pairs whose reversing configs
    pass the narrower band over themselves; that must never change a flag."""
    rng = np.random.default_rng([seed, 21])
    n_items, n_models = 240, 6
    configs = ("o0.letter", "o0.paren", "o0.digit", "o1.letter", "o2.letter", "cloze_qa",
               "cloze_bare")
    ability = rng.normal(0, 0.6, n_models)[:, None, None]
    # some configs reverse some models' order strongly, some weakly: both paths run
    twist = rng.normal(0, 0.8, (n_models, 1, len(configs)))
    twist[:, :, 0] = 0
    p = 1 / (1 + np.exp(-(ability + twist + rng.normal(0, 1, (1, n_items, len(configs))))))
    bits = rng.random((n_models, n_items, len(configs))) < p
    present = rng.random(bits.shape) > 0.03
    bench = np.array(["b1", "b2", "b3"] * (n_items // 3), dtype=object)
    cube = Cube(tuple(f"m{k}" for k in range(n_models)),
                tuple(f"{bench[i]}/{i}" for i in range(n_items)), configs, bits & present,
                present, bench)
    pairs = [(f"m{a}", f"m{b}") for a in range(n_models) for b in range(a + 1, n_models)]
    got = {((d.a, d.b), d.target): d.harness_configs
           for d in decide_pairs(cube, pairs, seed=seed, n_boot=300)}
    assert got == full_family_harness(cube, pairs, seed, 300, 0.02)
    assert any(got.values())  # the grids do raise the flag somewhere
