"""A plot shown beside long text keeps enough rows to read: at 30 rows the Compare pane's
decision lines used to squeeze its plot to one row of points, all drawn on a single tick."""

from __future__ import annotations

import pytest

from fragility_tui.tui.app import FragilityApp
from .conftest import open_pane, wait_ready

pytestmark = pytest.mark.anyio

ROWS_OF_POINTS = 6  # the plot's frame, axes and labels take 8 rows of its height


@pytest.mark.parametrize("size", [(80, 30), (120, 40)])
async def test_the_compare_plot_keeps_six_rows_of_points(synthetic_store, size):
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=size) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "8")
        plot = app.query_one("#compare-plot")
        assert plot.display  # from 30 rows the plot is shown with its table
        assert plot.outer_size.height >= 8 + ROWS_OF_POINTS, plot.outer_size
        pane = app.pane("compare")
        pane.scroll_end(animate=False)  # the table below is reached by scrolling the pane
        await pilot.pause()
        table = app.query_one("#compare-table")
        assert table.display and table.region.height > 0
