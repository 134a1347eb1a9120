"""The shipped synthetic grid reproduces the reference study's figures within the stated
tolerances, and docs/spec.md's paper-vs-synthetic table is exactly what the shipped file gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fragility_tui.analysis.reference_figures import (FIGURES, figures, markdown_table,
                                                      parameters_table, within)
from fragility_tui.analysis.report import build_report
from fragility_tui.store.sample_grids import shipped_cube
from fragility_tui.grid.simulate import SimulationParams

SPEC_DOC = Path(__file__).parents[2] / "docs" / "spec.md"
TABLE = re.compile(r"<!-- synthetic-figures:begin -->\n(.*?)<!-- synthetic-figures:end -->", re.S)
PARAMS = re.compile(r"<!-- synthetic-params:begin -->\n(.*?)<!-- synthetic-params:end -->", re.S)


@pytest.fixture(scope="module")
def shipped_figures():
    """Figures of sample_grids/synthetic-12x3679.parquet with the report's defaults."""
    return figures(build_report(shipped_cube("synthetic-12x3679")))


@pytest.mark.parametrize("key", list(FIGURES))
def test_shipped_grid_reproduces_the_reference_figure(shipped_figures, key):
    label, paper, tol, _ = FIGURES[key]
    value = shipped_figures[key]
    assert value is not None and within(key, value), f"{label}: {value} vs paper {paper} ± {tol}"


def test_docs_table_is_what_the_shipped_grid_gives(shipped_figures):
    found = TABLE.search(SPEC_DOC.read_text())
    assert found, "docs/spec.md lacks the synthetic-figures table markers"
    assert found.group(1) == markdown_table(shipped_figures), (
        "docs/spec.md's table is stale: print a fresh one with "
        "`python benchmarks/fit_synthetic.py --table`")


def test_docs_list_the_shipped_parameters():
    found = PARAMS.search(SPEC_DOC.read_text())
    assert found and found.group(1) == parameters_table(SimulationParams())


def test_the_table_reports_a_figure_out_of_tolerance():
    values = {key: paper for key, (_, paper, _, _) in FIGURES.items()}
    assert "| NO |" not in markdown_table(values)
    values["mean_kendall_tau"] = 0.79  # the v1 generator's figure
    assert "| mean Kendall tau vs reference | 0.42 | 0.79 | ± 0.08 | NO |" in markdown_table(values)
    assert not within("max_robust_accuracy", 23.1) and within("max_robust_accuracy", 10.0)
