"""The synthetic generator: deterministic, and shaped like the reference study."""

from __future__ import annotations

import numpy as np

from fragility_tui.grid.configs import CONFIG_IDS, REFERENCE
from fragility_tui.grid.simulate import simulate


def test_same_seed_same_grid_other_seed_other_grid():
    a, b, c = simulate(4, 200, 3), simulate(4, 200, 3), simulate(4, 200, 4)
    assert (a.cube.bits == b.cube.bits).all()
    assert (a.cube.bits != c.cube.bits).any()
    assert a.items == b.items


def test_paper_sized_grid_has_the_reference_shape():
    cube = simulate(12, 3679, 0).cube
    assert cube.shape == (12, 3679, 26) and cube.configs == CONFIG_IDS
    counts = {b: int((cube.benchmarks == b).sum()) for b in set(cube.benchmarks)}
    assert counts == {"arc_challenge": 1000, "hellaswag": 1000, "mmlu": 1000, "truthfulqa": 679}
    acc = cube.bits.mean(axis=1)  # [model, config]
    ref = acc[:, CONFIG_IDS.index(REFERENCE)]
    spread = acc.max(axis=1) - acc.min(axis=1)
    robust = cube.bits.all(axis=2).mean(axis=1)
    ref_correct = cube.bits[:, :, CONFIG_IDS.index(REFERENCE)]
    fragile = ~(cube.bits.all(axis=2) | (~cube.bits).all(axis=2))
    fragile_share = (ref_correct & fragile).sum(axis=1) / ref_correct.sum(axis=1)
    assert ref.min() < 0.5 and ref.max() > 0.8  # a leaderboard from weak to strong
    assert np.median(spread) > 0.2  # bands tens of points wide
    assert robust.max() < 0.25  # robust accuracy low
    assert np.mean(fragile_share) > 0.8  # most reference-correct answers fragile
    # scoring is the strongest axis: the likelihood configs are each model's worst
    worst = acc.argmin(axis=1)
    assert np.mean([CONFIG_IDS[w].startswith("cloze") for w in worst]) > 0.8
