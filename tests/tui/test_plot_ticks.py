"""The plots' y ticks (plots.RowTicks): never two on one row of points, zero among them when
the range spans it, and as many as the rows hold."""

from __future__ import annotations

import pytest

from fragility_tui.tui.plots import RowTicks

RANGES = [(-35.0, 35.0), (-0.02, 1.02), (0.0, 100.0), (-1.1, 1.1), (-3.3, 57.2), (0.4, 0.45)]


@pytest.mark.parametrize("lo, hi", RANGES)
def test_ticks_never_share_a_row_and_keep_zero(lo, hi):
    for rows in range(1, 41):
        ticks = RowTicks(rows).get_ticks(lo, hi)
        assert ticks and all(lo <= t <= hi for t in ticks), (rows, ticks)
        row_of = [round((hi - t) / (hi - lo) * (rows - 1)) for t in ticks]
        assert len(set(row_of)) == len(ticks), (rows, ticks)
        if lo < 0 < hi:
            assert 0.0 in ticks, (rows, ticks)


def test_a_six_row_compare_plot_gets_three_labelled_ticks_not_seven():
    ticks = RowTicks(6).get_ticks(-35.0, 35.0)
    assert ticks == [-20.0, 0.0, 20.0]
    assert RowTicks(6).get_labels_for_ticks(ticks) == ["-20", "0", "20"]


def test_a_tall_plot_gets_up_to_eight_ticks():
    assert len(RowTicks(30).get_ticks(0.0, 100.0)) == 6  # 0, 20, ..., 100
    assert len(RowTicks(30).get_ticks(-0.02, 1.02)) == 6  # 0.0, 0.2, ..., 1.0
