"""SPEC §8's optional 2PL IRT discrimination: recovery on a grid simulated from known 2PL
parameters, the analytic gradient, undefined items, and the report/CLI switch."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fragility_tui.analysis.irt import _objective, _quadrature, fit_2pl, irt_discrimination
from fragility_tui.analysis.report import build_report, report_of
from fragility_tui.analysis.report_text import render_text
from fragility_tui.grid.cube import Cube

FAST = dict(n_boot=50, k=10, n_random=20)


def simulated(n_models=400, n_items=80, missing=0.1, seed=0):
    """A 2PL grid: θ ~ N(0, 1), a ~ U(0.3, 2.5), b ~ N(0, 1); the reference config's cells
    follow the model, a second config flips a tenth of them (fragility to correlate)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    a, b = rng.uniform(0.3, 2.5, n_items), rng.normal(size=n_items)
    prob = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    ref = rng.random((n_models, n_items)) < prob
    other = ref ^ (rng.random(ref.shape) < 0.1)
    bits = np.stack([ref, other], axis=2)
    present = rng.random(bits.shape) >= missing
    cube = Cube(tuple(f"m{k:03d}" for k in range(n_models)),
                tuple(f"b/{k:03d}" for k in range(n_items)), ("o0.letter", "cloze_qa"),
                bits & present, present, np.array(["b"] * n_items, dtype=object))
    return cube, a, b, theta


def test_recovers_known_discrimination():
    cube, a, b, theta = simulated()
    ref = cube.reference_index
    fit = fit_2pl(cube.bits[:, :, ref], cube.present[:, :, ref])
    assert fit.converged
    assert np.isfinite(fit.a).all()
    assert np.corrcoef(fit.a, a)[0, 1] >= 0.9
    assert np.corrcoef(fit.b, b)[0, 1] >= 0.85
    assert np.corrcoef(fit.theta, theta)[0, 1] >= 0.95
    assert np.array_equal(irt_discrimination(cube), fit.a)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    y = (rng.random((30, 12)) < 0.6).astype(float)
    p = (rng.random((30, 12)) < 0.9).astype(float)
    y *= p
    nodes, log_w = _quadrature(21)
    x = np.concatenate([rng.uniform(0.3, 2.0, 12), rng.normal(size=12)])
    value, grad = _objective(x, y, p, nodes, log_w)
    eps = 1e-6
    for j in range(24):
        step = np.zeros(24)
        step[j] = eps
        numeric = (_objective(x + step, y, p, nodes, log_w)[0]
                   - _objective(x - step, y, p, nodes, log_w)[0]) / (2 * eps)
        assert numeric == pytest.approx(grad[j], rel=1e-5, abs=1e-6)


def test_constant_and_sparse_items_are_undefined():
    bits = np.array([[1, 0, 1, 1], [1, 0, 0, 0], [1, 0, 1, 0]], dtype=bool)
    present = np.ones_like(bits)
    present[1:, 3] = False  # item 3: one model only
    fit = fit_2pl(bits, present)
    assert np.isnan(fit.a[[0, 1, 3]]).all() and np.isfinite(fit.a[2])


def test_report_switches_discrimination_behind_r_top_k_and_compression():
    cube, *_ = simulated(n_models=60, n_items=40, seed=2)
    ctt = build_report(cube, **FAST)
    typed_irt = report_of(cube, discrimination="irt", **FAST)
    irt = typed_irt.to_json()
    assert ctt["discrimination"]["method"] == "item-total"
    assert irt["discrimination"]["method"] == irt["settings"]["discrimination"] == "irt"
    assert irt["discrimination"]["r"] != ctt["discrimination"]["r"]
    assert irt["discrimination"]["items_defined"] == 40
    # everything outside §8 is the same report
    for key in ("bands", "pairs", "configs", "decisions", "axes"):
        assert irt[key] == ctt[key]
    assert "discrimination = 2PL IRT slope" in render_text(typed_irt)
    with pytest.raises(ValueError, match="discrimination must be one of"):
        build_report(cube, discrimination="rasch", **FAST)


def test_cli_flag(tmp_path):
    from helpers import run_cli

    db = tmp_path / "s.duckdb"
    run_cli("simulate", "--models", "6", "--items", "60", "--grid", "g", db=db, check=True)
    proc = run_cli("report", "--grid", "g", "--discrimination", "irt", "--json", "--boot", "50",
                   "--random-draws", "10", "--k", "10", db=db, check=True)
    r = json.loads(proc.stdout)
    assert r["discrimination"]["method"] == "irt" and r["compression"]["k"] == 10


def test_slope_standard_errors_cover_the_truth_and_shrink_with_models():
    """On the 400 × 80 recovery grid the cross-product standard errors are honest enough
    that fitted ± 1.96·SE covers the true slope for most items (0.88 measured); with 60
    models they are wider."""
    cube, a, *_ = simulated()
    fit = fit_2pl(cube.bits[:, :, 0], cube.present[:, :, 0])
    assert np.isfinite(fit.a_se).all() and (fit.a_se > 0).all()
    assert np.mean(np.abs(fit.a - a) <= 1.96 * fit.a_se) >= 0.8
    few, *_ = simulated(n_models=60, seed=2)
    fit_few = fit_2pl(few.bits[:, :, 0], few.present[:, :, 0])
    assert np.median(fit_few.a_se) > 1.5 * np.median(fit.a_se)


def test_report_warns_below_the_model_count_where_recovery_is_poor():
    from fragility_tui.analysis.irt import MIN_MODELS

    few, *_ = simulated(n_models=60, n_items=40, seed=2)
    typed = report_of(few, discrimination="irt", **FAST)
    report = typed.to_json()
    info = report["discrimination"]["irt"]
    assert (info["n_models"], info["min_models"]) == (60, MIN_MODELS)
    assert "below 100 models slope recovery is poor" in info["warning"]
    assert info["slope_se_median"] > 0
    assert "warning: 2PL slopes from 60 models" in render_text(typed)
    many, *_ = simulated(n_models=MIN_MODELS, n_items=40, seed=3)
    at_many = build_report(many, discrimination="irt", **FAST)["discrimination"]
    assert at_many["irt"]["warning"] is None
    # issue 43: the standard errors' under-coverage is said at any model count, with the
    # measured coverage, and why the two-way interval of r is not given
    assert "under-cover at any model count" in at_many["irt"]["slope_se_warning"]
    assert "53% at 100" in at_many["irt"]["slope_se_warning"]
    assert at_many["ci_two_way"] is None and "refit the 2PL" in at_many["irt"]["two_way_ci"]
    text = render_text(typed)
    assert "warning: slope standard errors under-cover" in text
    assert "note: the interval resampling items and models is not given" in text
    # the item-total default carries no IRT section
    assert build_report(few, **FAST)["discrimination"]["irt"] is None
