"""Hypothesis properties of the report on random small grids (SPEC §4–9)."""

from __future__ import annotations

import json
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fragility_tui.grid.cube import Cube
from fragility_tui.analysis.report import build_report
from fragility_tui.harness.configs import CONFIG_IDS

FAST = dict(n_boot=40, k=3, n_random=8)
SETTINGS = settings(max_examples=int(os.environ.get("ANALYSIS_EXAMPLES", "25")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cubes(draw):
    n_models = draw(st.integers(2, 4))
    n_items = draw(st.integers(3, 12))
    extra = draw(st.sets(st.sampled_from(CONFIG_IDS[1:]), max_size=5))
    configs = tuple(c for c in CONFIG_IDS if c == "o0.letter" or c in extra)
    seed = draw(st.integers(0, 2**32 - 1))
    p_correct = draw(st.sampled_from([0.3, 0.6, 0.9]))
    p_missing = draw(st.sampled_from([0.0, 0.0, 0.1]))
    rng = np.random.default_rng(seed)
    shape = (n_models, n_items, len(configs))
    present = rng.random(shape) >= p_missing
    # mostly SPEC's o0.letter; sometimes another config in view (--reference)
    reference = draw(st.sampled_from(("o0.letter",) * len(configs) + configs))
    ref = configs.index(reference)
    blank = draw(st.sampled_from([None, None, None, "reference", "last config"]))
    if blank == "reference":
        present[0, :, ref] = False  # a model with no reference cell at all
    elif blank == "last config":
        present[-1, :, -1] = False  # a model missing a whole config
    bits = (rng.random(shape) < p_correct) & present
    benchmarks = np.array([["b1", "b2", "b3"][i % draw(st.integers(1, 3))] for i in range(n_items)],
                          dtype=object)
    return Cube(tuple(f"model{k}" for k in range(n_models)),
                tuple(f"{benchmarks[i]}/item{i}" for i in range(n_items)), configs, bits,
                present, benchmarks, reference=reference)


def permuted(cube: Cube, rng) -> Cube:
    m = rng.permutation(len(cube.models))
    i = rng.permutation(len(cube.items))
    grid = np.ix_(m, i, np.arange(len(cube.configs)))
    return Cube(tuple(cube.models[k] for k in m), tuple(cube.items[k] for k in i), cube.configs,
                cube.bits[grid], cube.present[grid], cube.benchmarks[i],
                reference=cube.reference)


@SETTINGS
@given(cubes(), st.integers(0, 1000))
def test_invariant_to_model_and_item_order(cube, perm_seed):
    a = build_report(cube, **FAST)
    b = build_report(permuted(cube, np.random.default_rng(perm_seed)), **FAST)
    assert json.dumps(a) == json.dumps(b)


@SETTINGS
@given(cubes())
def test_structural_inequalities(cube):
    r = build_report(cube, **FAST)
    for band in r["bands"]:
        assert band["robust_correct"] <= band["reference_correct"]
        assert sum(band[k] for k in ("robust_correct", "robust_wrong", "fragile",
                                     "incomplete")) == r["grid"]["n_items"]
    for model, axes in r["axes"]["per_model"].items():
        if axes["all"] is not None:
            for axis in ("order", "format", "scoring"):
                if axes[axis] is not None:
                    assert axes["all"] <= axes[axis] + 1e-12, (model, axis)
    nonzero = [p for p in r["pairs"] if p["adjacent"] and p["gap"] != 0]
    pooled = r["pairs_summary"]["pooled_fragile_share"]
    total = sum(p["gap"] for p in nonzero)
    if nonzero and total != 0:
        assert abs(pooled - sum(p["fragile_gap"] for p in nonzero) / total) < 1e-12
    for p in r["pairs"]:
        # SPEC v3 §6: the three parts add up to Δ; a complete grid has no incomplete part
        assert p["stable_gap"] + p["incomplete_gap"] + p["fragile_gap"] == p["gap"]
        if r["grid"]["complete"]:
            assert p["incomplete_gap"] == 0
        assert p["a_only_stable"] + p["b_only_stable"] <= p["stable_items"]
    for d in r["decisions"]:
        assert d["label"] == (d["flags"][0] if d["flags"] else "stable")
        if d["ci"] is not None:
            assert d["ci"][0] <= d["ci"][1] + 1e-12


@SETTINGS
@given(cubes())
def test_json_is_deterministic_and_strict(cube):
    a = json.dumps(build_report(cube, seed=5, **FAST), allow_nan=False)
    b = json.dumps(build_report(cube, seed=5, **FAST), allow_nan=False)
    assert a == b
