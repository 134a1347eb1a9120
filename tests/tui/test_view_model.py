"""The Items query language and the selection, without the UI."""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.grid.simulate import simulate
from fragility_tui.tui.view_model import ItemFilter, Selection, build_view, filter_items


def test_item_filter_parses_every_token():
    f = ItemFilter.parse("bench:MMLU subject:Phys frag>=0.5 flips:model-a  Paris ")
    assert (f.benchmark, f.subject, f.flips_for, f.frag_op, f.frag_value, f.text) == \
        ("mmlu", "phys", "model-a", ">=", 0.5, "paris")
    assert ItemFilter.parse("frag<.25").frag_value == 0.25
    odd = ItemFilter.parse("frag>1.2.3 [bold]")  # not a number: stays free text, no crash
    assert odd.frag_op is None and odd.text == "frag>1.2.3 [bold]"


@pytest.fixture(scope="module")
def view():
    grid = simulate(5, 60, 2)
    return build_view("g", True, 0, grid.cube, {it.item_uid: it for it in grid.items},
                      Selection())


def test_filter_items_matches_numpy(view):
    idx = filter_items(view, ItemFilter.parse("bench:hellaswag frag>0.5"))
    expected = np.flatnonzero((view.cube.benchmarks == "hellaswag") & (view.fragility > 0.5))
    assert idx.tolist() == expected.tolist()
    model = view.cube.models[2]
    flips = filter_items(view, ItemFilter.parse(f"flips:{model}"))
    assert flips.tolist() == np.flatnonzero(view.classes[2] == 2).tolist()
    assert filter_items(view, ItemFilter.parse("flips:no-such-model")).size == 0
    text = filter_items(view, ItemFilter.parse("item 7 "))
    assert [view.cube.items[k] for k in text] == [u for u in view.cube.items
                                                  if "item 7 " in view.items[u].question]


def test_selection_keeps_the_reference_and_describes_itself(view):
    with pytest.raises(ValueError, match="reference config o0.letter"):
        Selection(configs=("o1.letter",)).apply(view.full)
    sel = Selection(configs=("o0.letter", "cloze_qa"), models=view.full.models[:2])
    assert sel.apply(view.full).shape == (2, 60, 2)
    assert sel.describe(view.full) == "selection: 2/26 configs, 2/5 models"
    assert Selection().describe(view.full) == "selection: everything"
    sub = build_view("g", True, 0, view.full, view.items, sel)
    assert [b.band.model for b in sub.report.bands] and len(sub.report.configs) == 2
    assert len(sub.item_table) == 60 and sub.item_table[0][0] == view.full.items[0]


def test_a_grid_without_o0_letter_computes_against_its_default_reference(view):
    """A grid imported from lm-eval's cloze samples: the view uses the report's default
    reference (the first config in canonical order) and the status line names it."""
    cloze = view.full.select(configs=["cloze_qa", "cloze_bare"])
    sub = build_view("g", True, 0, cloze, view.items, Selection())
    assert sub.full.reference == sub.cube.reference == "cloze_qa"
    assert sub.report.grid.reference == "cloze_qa"
    assert Selection().describe(sub.full) == "selection: everything · reference cloze_qa"
    with pytest.raises(ValueError, match="reference config cloze_qa"):
        Selection(configs=("cloze_bare",)).apply(sub.full)
    only = build_view("g", True, 0, cloze, view.items, Selection(configs=("cloze_qa",)))
    assert len(only.report.configs) == 1


def test_a_big_grids_two_steps_classify_once(monkeypatch, view):
    """The app builds a big grid's first sections, then the rest, on one basis."""
    import fragility_tui.analysis.classify as classify_module
    from helpers import count_calls

    calls = count_calls(monkeypatch, classify_module, "classify", "config_accuracy")
    first = build_view("g", True, 0, view.full, view.items, Selection(), first=True)
    assert first.partial and calls == {"classify": 1, "config_accuracy": 1}
    rest = build_view("g", True, 0, view.full, view.items, Selection(), basis=first.basis)
    assert not rest.partial and calls == {"classify": 1, "config_accuracy": 1}
    assert rest.classification is first.classification
