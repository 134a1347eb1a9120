"""The Items pane holds every item of a grid: a virtual table, sortable, filterable."""

from __future__ import annotations

import math
import re

import pytest

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.virtual_table import VirtualTable

from .conftest import open_pane, screen_text, wait_ready

pytestmark = pytest.mark.anyio


def items_table(app) -> VirtualTable:
    return app.pane("items").query_one(VirtualTable)


async def test_the_last_of_3679_items_is_reachable_and_sorts_by_fragility(shipped_store,
                                                                          monkeypatch):
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "synthetic-12x3679")
    app = FragilityApp(str(shipped_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot, timeout=120)
        await open_pane(app, pilot, "4")
        table = items_table(app)
        assert table.row_count == len(app.view.cube.items) == 3679
        await pilot.click(table)
        await pilot.press("end")
        await pilot.pause()
        last = app.view.cube.items[-1]
        assert table.current_key() == last
        assert last in screen_text(app)  # scrolled into view, not only selected

        fragility = [c.label for c in table.columns_spec].index("fragility")
        table.sort_by(fragility)
        await pilot.pause()
        values = [v[fragility] for _, v in table.shown_rows]
        defined = [v for v in values if v is not None and not math.isnan(v)]
        assert defined == sorted(defined) and len(values) == 3679
        assert "fragility ▲" in screen_text(app)
        await pilot.press("o")  # again: the most fragile first
        await pilot.pause()
        top = table.shown_rows[0][1][fragility]
        assert top == max(defined)

        await pilot.press("home", "down", "enter")
        await pilot.pause()
        assert app.screen.item_uid == table.shown_rows[1][0]


async def test_a_filter_returns_every_match(shipped_store, monkeypatch):
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "synthetic-12x3679")
    app = FragilityApp(str(shipped_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot, timeout=120)
        pane = await open_pane(app, pilot, "4")
        pane.apply_filter("frag>0.2")
        await pilot.pause()
        expected = int((app.view.fragility > 0.2).sum())
        assert expected > 500  # more than the old 500-row cap
        assert items_table(app).row_count == expected
        assert f"Items ({expected:,} of 3,679)" in screen_text(app)




async def test_the_model_drilldown_shows_every_item_in_one_compact_row(synthetic_store):
    from fragility_tui.tui.screens import ItemScreen, ModelScreen

    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "2")
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ModelScreen)
        items = screen.query_one("#model-items", VirtualTable)
        cube = app.view.cube
        m = list(cube.models).index(screen.model)
        assert items.row_count == len(cube.items)
        key, values = items.shown_rows[0]
        marks = values[3].replace(" ", "")  # after the class and the tally
        assert len(marks) == 26
        assert marks == "".join("·" if not cube.present[m, 0, j] else
                                "✓" if cube.bits[m, 0, j] else "✗"
                                for j in range(26))  # canonical config order = layout order
        text = screen_text(app)
        assert " o0   o1   o2   o3   o4   o5   cl" in text and "LPDI LPDI" in text
        # the class and all 26 marks on screen at 80 columns
        assert re.search(re.escape(key[-9:]) + r" +" + re.escape(values[1]) + r" +" +
                         re.escape(values[2]) + " +" + re.escape(values[3].strip()), text)
        items.focus()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ItemScreen) and app.screen.item_uid == cube.items[1]


async def test_a_big_grid_shows_its_bands_before_the_bootstrap_statistics(synthetic_store,
                                                                          monkeypatch):
    """From FIRST_SECTIONS_CELLS a grid's Bands and Items come first; the panes that need the
    bootstrap statistics say so until they are computed, then show them."""
    import threading

    import fragility_tui.analysis.report as report

    monkeypatch.setattr("fragility_tui.tui.session.FIRST_SECTIONS_CELLS", 1)
    release = threading.Event()
    full_report = report.report_of

    def slow_report_of(*args, **kwargs):
        release.wait(30)
        return full_report(*args, **kwargs)

    monkeypatch.setattr(report, "report_of", slow_report_of)
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        while app.view is None:
            await pilot.pause(0.05)
        assert app.view.partial and app.computing
        assert "bands ready" in str(app.query_one("#status").render())
        for key, pane in (("2", "bands"), ("3", "pairs")):  # not open_pane: it waits for
            await pilot.press(key)                        # the worker held above
            while app.query_one("#panes").current != pane:
                await pilot.pause(0.05)
            await pilot.pause()
            if pane == "bands":
                assert "synthetic-model" in screen_text(app)
        assert "computing the statistics" in screen_text(app)
        release.set()
        await wait_ready(app, pilot)
        assert not app.view.partial
        await open_pane(app, pilot, "3")
        text = screen_text(app)
        assert "computing the statistics" not in text and "Adjacent pairs" in text


async def test_the_item_drilldown_underlines_near_tie_cells(synthetic_store):
    """Cells recorded near_tie (decided inside rounding) are marked in the item's bit
    matrix, and the legend says how many and what that means."""
    from textual.widgets import DataTable, Static

    from fragility_tui.tui.screens import ItemScreen, ModelScreen

    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "2")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ModelScreen)
        model, item = app.screen.model, app.view.cube.items[0]
        # The item screen reads its cells when it opens: mark two of them now.
        with synthetic_store.connect() as con:
            con.execute("UPDATE cells SET margin = 0.01, near_tie = true WHERE model = ? AND "
                        "item_uid = ? AND config_id IN ('o0.paren', 'cloze_qa')",
                        [model, item])
        app.screen.query_one("#model-items").focus()
        await pilot.press("enter")
        for _ in range(200):
            await pilot.pause(0.05)
            screen = app.screen
            if isinstance(screen, ItemScreen) and screen.cells:
                break
        assert isinstance(screen, ItemScreen) and screen.item_uid == item
        await pilot.pause()
        table = screen.query_one("#bit-matrix", DataTable)
        styles = {c: str(table.get_cell(model, c).style) for c in ("o0.paren", "cloze_qa",
                                                                    "o0.letter")}
        assert "underline" in styles["o0.paren"] and "underline" in styles["cloze_qa"]
        assert "underline" not in styles["o0.letter"]
        legend = str(screen.query_one("#matrix-legend", Static).render())
        assert "2 near-tie cell(s) underlined" in legend


async def test_a_sort_takes_the_cursor_to_the_top(synthetic_store):
    """Issue 24 (13): after `o` the view shows the sorted order from its first row; the
    cursor stayed on its item before, so the rows around it looked unsorted."""
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "4")
        table = items_table(app)
        await pilot.click(table)
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1 and table.scroll_offset.y > 0
        await pilot.press("o")  # sort by the first column (item id)
        await pilot.pause()
        ids = [key for key, _ in table.shown_rows]
        assert ids == sorted(ids)
        assert table.cursor_row == 0 and table.current_key() == ids[0]
        assert table.scroll_offset.y == 0 and ids[0] in screen_text(app)
