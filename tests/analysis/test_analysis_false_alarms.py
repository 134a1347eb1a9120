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
