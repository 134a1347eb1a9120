"""benchmarks/synthetic_pass_chance.py: the chance that eight seeds pass the acceptance, from
each figure's count of seeds inside (the arithmetic; the draws are the fit's)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "synthetic_pass_chance.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("synthetic_pass_chance", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_figure_inside_on_half_the_seeds_passes_eight_at_the_binomial_tail(script):
    # share (12 + 0.5) / 25 = 0.5: P(Bin(8, 0.5) >= 6) = (28 + 8 + 1) / 256
    assert script.pass_chance({"a": 12}, 24) == pytest.approx(37 / 256)


def test_figures_multiply_and_a_figure_always_inside_is_not_certain(script):
    always = script.pass_chance({"a": 24}, 24)
    assert 0.99 < always < 1.0
    assert script.pass_chance({"a": 24, "b": 12}, 24) == pytest.approx(always * 37 / 256)


def test_a_figure_never_inside_leaves_almost_no_chance(script):
    assert script.pass_chance({"a": 0}, 24) < 1e-8


def test_pool_adds_the_counts_of_a_setting_over_seed_sets(script, tmp_path):
    def written(name, first, last, shipped, step):
        doc = {"seeds": [first, last], "rows": [
            {"params": "shipped", "inside": {"a": shipped, "b": 24}},
            {"params": {"x": 1.0}, "inside": {"a": step, "b": 24}}]}
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        return str(path)

    pooled = script.pool([written("1.json", 100, 123, 12, 24), written("2.json", 124, 147, 20, 0)])
    chances = {setting: (chance, weak) for chance, setting, weak in pooled}
    assert chances['"shipped"'] == (script.pass_chance({"a": 32, "b": 48}, 48), {"a": 32})
    assert chances['{"x": 1.0}'] == (script.pass_chance({"a": 24, "b": 48}, 48), {"a": 24})
    assert [setting for _, setting, _ in pooled] == ['"shipped"', '{"x": 1.0}']  # best first
