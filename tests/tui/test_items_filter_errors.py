"""Issue 24 (13): an items query that cannot work says why instead of showing an empty table,
and `flips:` never picks one of two models silently."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from fragility_tui.tui.view_model import FRAGILE, ItemFilter, filter_items, filter_problems

MODELS = ["smollm2-135m-instruct+int8", "smollm2-135m-instruct+int4", "gemma3-270m"]


def test_a_flips_name_that_matches_no_model_says_so():
    (problem,) = filter_problems(MODELS, "flips:gpt2")
    assert "flips:gpt2 names no model" in problem and "gemma3-270m" in problem


def test_an_ambiguous_flips_name_lists_the_candidates_and_keeps_nothing():
    (problem,) = filter_problems(MODELS, "flips:int")
    assert "matches 2 models" in problem and "+int8" in problem and "+int4" in problem
    classes = np.full((3, 4), FRAGILE)
    view = SimpleNamespace(cube=SimpleNamespace(models=MODELS, items=["a", "b", "c", "d"],
                                                benchmarks=np.array(["x"] * 4), subjects=None),
                           classes=classes, fragility=np.zeros(4), items={})
    assert len(filter_items(view, ItemFilter.parse("flips:int"))) == 0
    assert len(filter_items(view, ItemFilter.parse("flips:int4"))) == 4
    assert filter_problems(MODELS, "flips:int4") == []


def test_a_frag_condition_without_a_number_says_so():
    (problem,) = filter_problems(MODELS, "frag>abc")
    assert "'frag>abc' is not a fragility condition" in problem
    assert filter_problems(MODELS, "frag>0.5 bench:arc photosynthesis") == []
