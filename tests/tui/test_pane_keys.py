"""Rough edges of issue 44 in the panes' keys, each through the pilot: a filter stays with
its pane, the item matrix's cursor steps over its gaps, Compare's `g` works with a model
picker focused, Enter in a run form field starts the run, and a percentage column is copied
in percent."""

from __future__ import annotations

import pytest

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.screens import ItemScreen

from .conftest import open_pane, wait_ready, wait_while, walk_checks

pytestmark = pytest.mark.anyio


async def test_one_app_walks_the_pane_key_checks(synthetic_store):
    """The synthetic-store checks of this file on one app (issue 60: each started its own).
    In this order because each leaves the app as the next expects: the item drill-down is
    left with Esc; the Items filter stays, so it comes after the drill-down, which opens the
    second item of the unfiltered list; the run form keeps its field focused, so it ends."""
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        await walk_checks(app, pilot, check_a_percentage_column_is_copied_in_percent,
                          check_the_item_matrix_cursor_steps_over_the_gaps,
                          check_compare_g_works_with_a_model_picker_focused,
                          check_a_filter_stays_with_its_pane,
                          check_enter_in_a_run_form_field_starts_the_run)


async def check_a_percentage_column_is_copied_in_percent(app, pilot):
    await open_pane(app, pilot, "2")
    await pilot.press("C")
    header, first = (line.split("\t") for line in app.clipboard.splitlines()[:2])
    assert header[1] == "ref %"
    reference = app.view.report.bands[0].band.reference
    assert float(first[1]) == pytest.approx(100 * reference) and float(first[1]) > 1


async def check_the_item_matrix_cursor_steps_over_the_gaps(app, pilot):
    await open_pane(app, pilot, "4")
    await pilot.press("down", "enter")
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert isinstance(app.screen, ItemScreen)
    matrix = app.screen.query_one("#bit-matrix")

    def config() -> str:
        return matrix.coordinate_to_cell_key(matrix.cursor_coordinate).column_key.value

    assert config() == "o0.letter"
    await pilot.press("right", "right", "right", "right")  # L P D I, then past the gap
    assert config() == "o1.letter"
    await pilot.press("left")
    assert config() == "o0.instruct"
    await pilot.press("left", "left", "left", "left")  # never onto the model names
    assert config() == "o0.letter"
    await pilot.press("escape")  # back to the Items pane for the next check
    await pilot.pause()
    assert not isinstance(app.screen, ItemScreen)


async def check_compare_g_works_with_a_model_picker_focused(app, pilot):
    pane = await open_pane(app, pilot, "8")
    pane.query_one("#compare-a").focus()
    await pilot.pause()
    assert pane.query_one("#compare-plot").display  # tall enough: plot and table
    await pilot.press("g")
    await pilot.pause()
    assert not pane.query_one("#compare-plot").display
    # (the app's keys work there too since issue 60: test_keys_where_focused.py)
    assert app.screen is app.main_screen and app.focused is pane.query_one("#compare-a")


async def check_a_filter_stays_with_its_pane(app, pilot):
    await open_pane(app, pilot, "4")
    query = f"flips:{app.view.cube.models[0]}"
    await pilot.press("slash", *query, "enter")
    await pilot.pause()
    items = app.pane("items").main_table()
    flipped = len(items.shown_rows)
    assert 0 < flipped < len(app.view.cube.items)
    await open_pane(app, pilot, "5")  # Axes: its rows are not items
    axes = app.pane("axes").main_table()
    box = app.query_one("#filter")
    assert len(axes.shown_rows) == len(axes.all_rows) > 0 and not box.display
    await open_pane(app, pilot, "4")  # the Items query is still there, and shown
    assert box.display and box.value == query and len(items.shown_rows) == flipped


async def check_enter_in_a_run_form_field_starts_the_run(app, pilot):
    runs = await open_pane(app, pilot, "7")
    runs.query_one("#run-configs").focus()
    await pilot.press("enter")  # no model: checked as Start checks it, nothing launched
    await pilot.pause()
    assert "fill in the model" in str(runs.query_one("#run-note").render())
    assert not runs.launched


async def test_the_model_plot_legend_keeps_builds_apart_beside_the_configs(shipped_store,
                                                                          monkeypatch):
    """starter-real's long names: the legend cuts them in the middle (`…+int4`, never a
    `[… more characters not shown]` tail), and the x range leaves its columns to it."""
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "starter-real")
    app = FragilityApp(str(shipped_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot, timeout=60)
        await open_pane(app, pilot, "2")
        await pilot.press("enter", "g")  # 80×24: g shows the plot instead of the table
        await pilot.pause()
        plot = app.screen.query_one("#model-plot")
        legend = plot.query_one("#legend")
        text = str(legend.render())
        assert "+int4" in text and "+int8" in text and "not shown" not in text
        last_config = len(app.view.cube.configs) - 1

        def last_point_left_of_the_legend() -> bool:  # once the plot is laid out
            x, _ = plot.get_pixel_from_coordinate(last_config, 50)
            return plot.margin_left + x < legend.offset.x

        await wait_while(app, pilot, lambda: not last_point_left_of_the_legend(), 10,
                         "the last config's point is under the legend")
