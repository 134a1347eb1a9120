"""Fragility that rounding alone explains: rows whose cells outside the near-tie tolerance
all agree (fragility_tui/analysis/near_ties.py), and the report section built on it."""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.analysis.near_ties import near_tie_fragility
from fragility_tui.analysis.report_text import render_text
from fragility_tui.grid.cube import Cube
from fragility_tui.store.schema import CellRow
from fragility_tui.store.store import Store

CONFIGS = ("o0.letter", "o0.paren", "cloze_qa")


def _cube(bits, present=None):
    bits = np.array(bits, dtype=bool)
    present = np.ones_like(bits) if present is None else np.array(present, dtype=bool)
    return Cube(("a", "b"), ("x/1", "x/2", "x/3"), CONFIGS, bits & present, present,
                np.array(["x"] * 3, dtype=object))


def test_rows_fragile_only_through_near_ties_are_counted_per_model():
    cube = _cube([[[1, 0, 1], [1, 0, 0], [1, 1, 1]],
                  [[0, 0, 0], [1, 0, 1], [0, 1, 0]]])
    near = np.zeros(cube.bits.shape, dtype=bool)
    near[0, 0, 1] = True  # a: item 1's only dissenting cell is a near-tie -> only near-ties
    near[0, 1, 2] = True  # a: item 2 still has a decided 1 and a decided 0 -> real
    near[1, 0, 0] = True  # b: item 1 is robust-wrong; a near-tie there changes nothing
    near[1, 2, :] = True  # b: item 3 is fragile and every cell is a near-tie -> counted
    got = {r.model: r for r in near_tie_fragility(cube, near)}
    assert (got["a"].fragile, got["a"].only_near_ties, got["a"].near_tie_cells) == (2, 1, 2)
    assert (got["b"].fragile, got["b"].only_near_ties, got["b"].near_tie_cells) == (2, 1, 4)


def test_incomplete_rows_are_never_counted_and_a_wrong_mask_is_refused():
    present = np.ones((2, 3, 3), dtype=bool)
    present[0, 0, 2] = False
    cube = _cube([[[1, 0, 1], [1, 1, 1], [1, 1, 1]], [[1, 1, 1]] * 3], present)
    near = np.zeros(cube.bits.shape, dtype=bool)
    near[0, 0, 1] = True
    assert near_tie_fragility(cube, near)[0].only_near_ties == 0
    with pytest.raises(ValueError, match="does not match"):
        near_tie_fragility(cube, near[:, :2])


def test_the_report_counts_near_tie_fragility_from_the_stored_cells(tmp_path):
    from fragility_tui.services.reports import grid_report
    from fragility_tui.items.item import Item

    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    store.add_items("g", [Item(f"x/{k}", "x", None, "q", ("a", "b", "c", "d"), 0)
                          for k in (1, 2)])
    rows = [CellRow("m", "x/1", "o0.letter", True, 0, margin=2.0, near_tie=False),
            CellRow("m", "x/1", "o0.paren", False, 1, margin=0.01, near_tie=True),
            CellRow("m", "x/2", "o0.letter", True, 0, margin=2.0, near_tie=False),
            CellRow("m", "x/2", "o0.paren", False, 1, margin=3.0, near_tie=False)]
    store.write_cells("g", rows)
    typed = grid_report(store, "g")
    report = typed.to_json()
    assert report["near_ties"] == [{"model": "m", "fragile": 2, "only_near_ties": 1,
                                    "near_tie_cells": 1}]
    text = render_text(typed)
    assert "Near-ties" in text and "only via near-ties" in text
