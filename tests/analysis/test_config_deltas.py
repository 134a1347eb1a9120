"""The Compare plot's per-config Δ̂: at the reference config it is the decision's own Δ̂
and interval (same estimator, same bootstrap draws); elsewhere it is each config's paired
accuracy difference."""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.analysis.config_deltas import config_deltas
from fragility_tui.analysis.decisions import canonical, decide_pairs
from fragility_tui.grid.reference import choose_reference
from fragility_tui.grid.simulate import simulate_cube


def test_the_reference_config_matches_the_decision_and_others_are_accuracy_gaps():
    cube = choose_reference(simulate_cube(4, 120, 3))
    a, b = cube.models[0], cube.models[1]
    deltas = config_deltas(cube, a, b, seed=5, n_boot=400)
    assert [d.config for d in deltas] == list(canonical(cube).configs)
    decision = decide_pairs(cube, [(a, b)], seed=5, n_boot=400)[0]  # observed target
    ref = next(d for d in deltas if d.config == cube.reference)
    assert ref.delta == pytest.approx(decision.delta)
    assert ref.ci == pytest.approx(decision.ci)
    ia, ib = cube.models.index(a), cube.models.index(b)
    for k, d in enumerate(deltas):
        c = canonical(cube).configs.index(d.config)
        j = list(cube.configs).index(d.config)
        both = cube.present[ia, :, j] & cube.present[ib, :, j]
        gap = (cube.bits[ia, both, j].mean() - cube.bits[ib, both, j].mean())
        assert d.delta == pytest.approx(gap, abs=1e-9), (k, c)
        assert d.ci is not None and d.ci[0] <= d.ci[1]
    assert len({round(d.delta, 6) for d in deltas}) > 1  # not one number repeated


def test_a_pair_with_no_shared_items_has_no_delta():
    cube = choose_reference(simulate_cube(2, 30, 1))
    present = cube.present.copy()
    present[1, :, :] = False
    present[1, :, 0] = True  # B only at the first config
    cube = type(cube)(models=cube.models, items=cube.items, configs=cube.configs,
                      bits=cube.bits, present=present, benchmarks=cube.benchmarks,
                      subjects=cube.subjects)
    deltas = {d.config: d for d in config_deltas(cube, cube.models[0], cube.models[1],
                                                 n_boot=100)}
    assert deltas[cube.configs[0]].delta is not None
    assert all(deltas[c].delta is None and deltas[c].ci is None for c in cube.configs[1:])
    assert np.isfinite(deltas[cube.configs[0]].delta)
