"""Pane 4: the items, filterable; Enter → the item's models × configs drill-down."""

from __future__ import annotations

import numpy as np
from textual.app import ComposeResult
from textual.widgets import DataTable

from fragility_tui.tui.compute import ItemFilter, filter_items
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.widgets import Column, ReportTable, safe_title

COLUMNS = [Column("item"), Column("benchmark"), Column("subject"), Column("fragility", "num"),
           Column("discrimination", "num"), Column("fragile models", "int"),
           Column("incomplete", "int"), Column("question", width=60)]
QUERY_HELP = ("/ filters: bench:NAME subject:NAME frag>0.5 flips:MODEL and free text "
              "(question, choices, id). Enter: drill down.")


def item_rows(view, indices: np.ndarray) -> list[tuple[str, list]]:
    """The Items-pane rows of these item indices (precomputed with the view)."""
    table = view.item_table
    return [table[k] for k in indices.tolist()]


class ItemsPane(Pane):
    pane_id = "items"
    title = "Items"
    help = QUERY_HELP

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.query_text = ""

    def compose_body(self) -> ComposeResult:
        yield ReportTable(table_name="items", id="items-table")

    def render_view(self, view) -> None:
        self._fill(view)

    def _fill(self, view) -> None:
        flt = ItemFilter.parse(self.query_text)
        indices = filter_items(view, flt)
        table = self.query_one(ReportTable)
        table.set_data(COLUMNS, item_rows(view, indices))
        title = f"Items ({len(indices):,} of {len(view.cube.items):,})"
        if self.query_text:
            title += f" — filter: {self.query_text}"
        table.border_title = safe_title(title)
        self.update_caption()

    def apply_filter(self, text: str) -> None:
        """Structured item query instead of the generic row filter."""
        if text == self.query_text:
            return
        self.query_text = text
        if self.app.view is not None and not self.stale:
            self._fill(self.app.view)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        from fragility_tui.tui.screens import ItemScreen

        self.app.push_screen(ItemScreen(event.row_key.value))

