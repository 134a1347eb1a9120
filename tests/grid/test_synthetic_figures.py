"""The synthetic generator reproduces the reference study's figures in expectation: on seeds
1-8 (never used by the fit, benchmarks/fit_synthetic.py fits seeds 100-123) every figure is
inside its documented tolerance on at least 6 of the 8 grids. The tolerances are the spread
measured before the fit, and docs/spec.md's tables are what the shipped grid and the
committed fit give."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fragility_tui.analysis.reference_figures import (FIGURES, figures, markdown_table,
                                                      parameters_table, within)
from fragility_tui.analysis.report import build_report
from fragility_tui.grid.simulate import SimulationParams, simulate
from fragility_tui.store.sample_grids import shipped_cube

ROOT = Path(__file__).parents[2]
SPEC_DOC = ROOT / "docs" / "spec.md"
PREFIT = ROOT / "benchmarks" / "synthetic_spread_prefit.json"
FIT = ROOT / "benchmarks" / "fit_synthetic.json"
TABLE = re.compile(r"<!-- synthetic-figures:begin -->\n(.*?)<!-- synthetic-figures:end -->", re.S)
PARAMS = re.compile(r"<!-- synthetic-params:begin -->\n(.*?)<!-- synthetic-params:end -->", re.S)
ACCEPTANCE_SEEDS = range(1, 9)
NEEDED = 6  # of the 8 seeds


@pytest.fixture(scope="module")
def seed_figures() -> dict[int, dict[str, float]]:
    """Figures of simulate(12, 3679, seed) for seeds 1-8, report defaults (~1.5 s a seed)."""
    return {s: figures(build_report(simulate(12, 3679, s).cube)) for s in ACCEPTANCE_SEEDS}


# NOT MET YET: with the parameters of benchmarks/fit_synthetic.json (generator v8, kept by
# benchmarks/fit_synthetic_v8_prereg.md) this figure is inside its tolerance on fewer than 6
# of seeds 1-8 (the count measured beside it). docs/spec.md names it. Strict: when a better
# generator reaches it, its xfail fails and must be removed.
NOT_REACHED = {"mean_fragile_share": 5}


@pytest.mark.parametrize("key", [
    pytest.param(k, marks=pytest.mark.xfail(
        strict=True, reason=f"not reached yet: inside on {NOT_REACHED[k]} of 8 seeds"))
    if k in NOT_REACHED else k for k in FIGURES])
def test_each_figure_is_within_tolerance_on_most_seeds(seed_figures, key):
    label, paper, tol, _ = FIGURES[key]
    values = {s: f[key] for s, f in seed_figures.items()}
    inside = [s for s, v in values.items() if v is not None and within(key, v)]
    assert len(inside) >= NEEDED, (
        f"{label}: inside paper {paper} ± {tol} on {len(inside)} of 8 seeds: {values}")


def test_tolerances_are_the_spread_measured_before_the_fit():
    """FIGURES' tolerances are half the 5-95% range over seeds at the pre-fit parameters,
    as benchmarks/fit_synthetic.py --spread wrote them (not widened after the fit)."""
    prefit = json.loads(PREFIT.read_text())
    assert prefit["seeds"] == list(range(100, 124))
    for key, (_, _, tol, _) in FIGURES.items():
        assert tol == pytest.approx(prefit["figures"][key]["tolerance"]), key
        spread = prefit["figures"][key]
        assert tol >= (spread["q95"] - spread["q05"]) / 2 - 1e-9, key


def test_shipped_parameters_are_the_committed_fit():
    fit = json.loads(FIT.read_text())
    shipped = {k: round(v, 4) for k, v in vars(SimulationParams()).items()}
    assert fit["params"] == shipped
    assert fit["seeds"] == list(range(100, 124))
    assert not set(fit["seeds"]) & {0, *ACCEPTANCE_SEEDS}  # the fit never saw these seeds


def test_docs_table_is_what_the_shipped_grid_and_the_fit_give():
    found = TABLE.search(SPEC_DOC.read_text())
    assert found, "docs/spec.md lacks the synthetic-figures table markers"
    shipped = figures(build_report(shipped_cube("synthetic-12x3679")))
    expected = markdown_table(shipped, json.loads(FIT.read_text())["figures"])
    assert found.group(1) == expected, (
        "docs/spec.md's table is stale: print a fresh one with "
        "`python benchmarks/fit_synthetic.py --table`")


def test_docs_list_the_shipped_parameters():
    found = PARAMS.search(SPEC_DOC.read_text())
    assert found and found.group(1) == parameters_table(SimulationParams())


def test_the_table_reports_a_figure_out_of_tolerance():
    values = {key: paper for key, (_, paper, _, _) in FIGURES.items()}
    over = {key: {"mean": paper, "q05": paper, "q95": paper, "inside": 24, "seeds": 24}
            for key, (_, paper, _, _) in FIGURES.items()}
    assert "| NO |" not in markdown_table(values, over)
    tau_tol = FIGURES["mean_kendall_tau"][2]
    values["mean_kendall_tau"] = 0.42 + tau_tol + 0.01  # one draw outside, the mean inside
    over["r"] = {"mean": -0.04, "q05": -0.08, "q95": 0.0, "inside": 0, "seeds": 24}  # outside
    table = markdown_table(values, over)
    assert (f"| mean Kendall tau vs reference | 0.42 | ± {tau_tol:.2f} | 0.42 | 0.42–0.42 | yes "
            f"| 24 of 24 | {0.43 + tau_tol:.2f} | NO |") in table
    assert "| discrimination-fragility r | 0.28 | ± 0.04 | -0.04 | -0.08–0.00 | NO | 0 of 24 |" \
        in table
    robust_tol = FIGURES["max_robust_accuracy"][2]
    assert not within("max_robust_accuracy", 21.5 + robust_tol + 0.1)
    assert within("max_robust_accuracy", 10.0)
