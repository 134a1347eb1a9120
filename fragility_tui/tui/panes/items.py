"""Pane 4: every item of the grid, filterable and sortable; Enter → the item's models × configs
drill-down. A VirtualTable: it draws only the rows on screen, so 20,000 items cost no more."""

from __future__ import annotations

from textual.app import ComposeResult

from fragility_tui.tui.item_table import ITEM_COLUMNS, item_rows
from fragility_tui.tui.messages import ShowItem
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.virtual_table import VirtualTable
from fragility_tui.tui.widgets import safe_title

QUERY_HELP = ("/ filters: bench:NAME subject:NAME frag>0.5 flips:MODEL and free text "
              "(question, choices, id). o or a header click sorts. Enter: drill down.")


class ItemsPane(Pane, pane_id="items", title="Items"):
    help = QUERY_HELP
    needs_statistics = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.query_text = ""

    def compose_body(self) -> ComposeResult:
        yield VirtualTable(table_name="items", id="items-table")

    def render_view(self, view) -> None:
        self._fill(view)

    def _fill(self, view) -> None:
        from fragility_tui.tui.view_model import (ItemFilter,  # numpy: not at start
                                                  filter_items, filter_problems)

        flt = ItemFilter.parse(self.query_text)
        indices = filter_items(view, flt)
        problems = filter_problems(list(view.cube.models), self.query_text)
        table = self.query_one(VirtualTable)
        table.set_data(ITEM_COLUMNS, item_rows(view, indices))
        title = f"Items ({len(indices):,} of {len(view.cube.items):,})"
        if self.query_text:
            title += f" — filter: {self.query_text}"
        if problems:  # an empty table with no word was the old answer to a typo
            title += " — " + "; ".join(problems)
        table.border_title = safe_title(title)
        self.update_caption()

    def apply_filter(self, text: str) -> None:
        """Structured item query instead of the generic row filter."""
        if text == self.query_text:
            return
        self.query_text = text
        if self.view is not None and not self.stale:
            self._fill(self.view)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        event.stop()
        self.post_message(ShowItem(event.key))
