"""F1 lists every binding in full at any width: at 80 columns the descriptions used to run
off the box's right edge, cut mid-word, with the keymap ids out of sight."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.bindings import help_rows
from fragility_tui.tui.screens import HelpScreen

from .conftest import wait_ready

pytestmark = pytest.mark.anyio


def shown_rows(table: DataTable) -> list[str]:
    return [" ".join(str(c) for c in table.get_row_at(k)) for k in range(table.row_count)]


async def test_help_fits_80_columns_and_gives_the_id_a_column_when_wide(synthetic_store):
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one(DataTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # no cut
        rows = shown_rows(table)
        for (key, does, where, binding_id), row in zip(help_rows(app.keymap), rows):
            assert does in row and binding_id in row and where in row, row
        assert len(table.columns) == 3
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert len(table.columns) == 4 and table.row_count == len(rows)
        assert table.virtual_size.width <= table.scrollable_content_region.width
