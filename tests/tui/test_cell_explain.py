"""The cell explanation's numbers: one format per quantity (counts with separators, ms as
integers), never a raw float."""

from __future__ import annotations

from fragility_tui.items.item import Item
from fragility_tui.tui.cell_explain import cell_detail


def test_cost_figures_are_formatted_not_raw():
    item = Item("toy/1", "toy", None, "What?", ("a", "b", "c", "d"), 0)
    cell = {"model": "m", "config_id": "o0.letter", "correct": True, "pred": 0,
            "permutation": "0123", "raw_output": "A", "scores": None, "tokens": 12345,
            "ms": 213.69775390625, "run_id": "r1"}
    text = cell_detail(item, "m", "o0.letter", cell, seed=0).plain
    assert "tokens 12,345 · 214 ms · run r1" in text
    assert "213.69" not in text


def test_cell_details_show_the_prompt_hash():
    cell = {"correct": True, "pred": 0, "scores": None, "prompt_sha": "ab" * 32}
    assert "prompt tokens sha256 abababababababab…" in cell_detail(None, "m", "cloze_qa", cell,
                                                                     0).plain


def test_a_near_tie_cell_says_so_with_its_margin():
    near = {"correct": False, "pred": 1, "scores": None, "margin": 0.0123, "near_tie": True}
    text = cell_detail(None, "m", "o0.letter", near, 0).plain
    assert "near-tie: margin 0.0123 is inside the run's rounding tolerance" in text
    far = dict(near, margin=4.5, near_tie=False)
    text = cell_detail(None, "m", "o0.letter", far, 0).plain
    assert "near-tie" not in text and "margin 4.5" in text
