"""The report's sections share one accuracy table and one classification (analysis/basis.py),
and the typed report writes the JSON document the CLI prints."""

from __future__ import annotations

import json

import numpy as np

import fragility_tui.analysis.classify as classify_module
from fragility_tui.analysis import calibration, report  # noqa: F401 - loaded before counting
from fragility_tui.analysis.basis import measure
from fragility_tui.analysis.classify import classify, config_accuracy
from fragility_tui.analysis.decisions import canonical
from fragility_tui.analysis.report import build_report, first_sections, report_of
from fragility_tui.grid.simulate import simulate_cube
from helpers import count_calls

FAST = dict(n_boot=50, k=10, n_random=20)


def _shuffled(cube, seed=3):
    """The cube with models and items out of canonical order (as a stored grid's items are)."""
    from fragility_tui.grid.canonical import reordered

    rng = np.random.default_rng(seed)
    return reordered(cube, rng.permutation(len(cube.models)), rng.permutation(len(cube.items)))


def test_every_section_reads_one_classification(monkeypatch):
    cube = _shuffled(simulate_cube(5, 80, seed=4))
    calls = count_calls(monkeypatch, classify_module, "classify", "config_accuracy")
    report_of(cube, pairs=[(cube.models[0], cube.models[1])], **FAST)
    assert calls == {"classify": 1, "config_accuracy": 1}
    basis = measure(cube)
    first_sections(basis)
    report_of(basis, **FAST)  # the app's two steps on one basis: nothing recomputed
    assert calls == {"classify": 2, "config_accuracy": 2}


def test_the_basis_is_the_classification_of_both_orders():
    cube = _shuffled(simulate_cube(4, 50, seed=1))
    basis = measure(cube)
    canon = canonical(cube)
    assert basis.cube is not cube and basis.cube.items == canon.items
    assert basis.source is cube
    np.testing.assert_array_equal(basis.classification.codes, classify(canon).codes)
    np.testing.assert_array_equal(basis.classification.complete, classify(canon).complete)
    np.testing.assert_array_equal(basis.source_classification.codes, classify(cube).codes)
    np.testing.assert_array_equal(basis.accuracy.accuracy, config_accuracy(canon).accuracy)


def test_the_typed_report_is_the_json_document():
    """Panes read the records; the CLI writes their to_json: same figures, keys fixed."""
    cube = simulate_cube(4, 50, seed=2)
    typed = report_of(cube, name="g", **FAST)
    doc = build_report(cube, name="g", **FAST)
    assert json.dumps(typed.to_json()) == json.dumps(doc)
    assert [row.band.model for row in typed.bands] == [b["model"] for b in doc["bands"]]
    assert typed.pairs[0].gap == doc["pairs"][0]["gap"]
    assert typed.pairs_summary.nonzero_gaps == doc["pairs_summary"]["nonzero_gaps"]
    assert typed.configs[0].accuracy == doc["configs"][0]["accuracy"]
    assert typed.axes.mean == doc["axes"]["mean"]
    assert list(doc) == ["spec_version", "grid", "settings", "bands", "pairs", "pairs_summary",
                         "configs", "rankings", "axes", "discrimination", "compression",
                         "decisions", "costs"]
