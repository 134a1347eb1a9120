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


# The acceptance of the synthetic twin (issue 20, decided in issue 43) is a rate over fresh
# seeds measured outside the project (benchmarks/synthetic_pass_chance.py, its figures in
# docs/spec.md, "The synthetic twin's acceptance"), not seeds 1-8: this figure is inside on
# 5 of seeds 1-8 and is left out of the per-seed check below; the generator is not refitted
# to reach it.
BY_PASS_CHANCE = {"mean_fragile_share": 5}
PASS_CHANCE = ROOT / "benchmarks" / "synthetic_pass_chance.json"
PASS_CHANCE_FRESH = ROOT / "benchmarks" / "synthetic_pass_chance_124.json"


@pytest.mark.parametrize("key", [k for k in FIGURES if k not in BY_PASS_CHANCE])
def test_each_figure_is_within_tolerance_on_most_seeds(seed_figures, key):
    label, paper, tol, _ = FIGURES[key]
    values = {s: f[key] for s, f in seed_figures.items()}
    inside = [s for s, v in values.items() if v is not None and within(key, v)]
    assert len(inside) >= NEEDED, (
        f"{label}: inside paper {paper} ± {tol} on {len(inside)} of 8 seeds: {values}")


def test_the_figure_left_to_the_pass_chance_is_still_where_docs_say(seed_figures):
    """Seeds 1-8 give the count the docs quote; a generator that moves it is noticed."""
    for key, count in BY_PASS_CHANCE.items():
        inside = sum(v is not None and within(key, v)
                     for v in (f[key] for f in seed_figures.values()))
        assert inside == count, (key, inside)


def _shipped_pass_chance(path: Path) -> float:
    rows = json.loads(path.read_text())["rows"]
    return next(r["pass_chance"] for r in rows if r["params"] == "shipped")


def test_docs_quote_the_measured_pass_chance():
    """docs/spec.md states the acceptance as the chance that eight fresh seeds pass, with
    the figures benchmarks/synthetic_pass_chance.py measured (fit seeds and fresh ones)."""
    text = SPEC_DOC.read_text()
    section = text[text.index("### The synthetic twin's acceptance"):]
    fit, fresh = _shipped_pass_chance(PASS_CHANCE), _shipped_pass_chance(PASS_CHANCE_FRESH)
    assert f"{fit:.2f}" in section and f"{fresh:.2f}" in section, (fit, fresh)


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
