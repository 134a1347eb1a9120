"""The `/` filter box under the panes: what is typed narrows the main table of the pane in
view, and only that pane's: each pane keeps its own filter, and the box shows the filter of
the pane in view (an Items query such as `flips:…` once emptied the Axes table unseen).
Drill-down screens have filters of their own."""

from __future__ import annotations

from textual import on
from textual.widgets import Input

from fragility_tui.tui.pane_switcher import PaneSwitcher


class FilterBox(Input):
    """Hidden until `/` (or while the pane in view has a filter); Enter keeps the filter and
    goes back to the table, Esc clears it."""

    def __init__(self) -> None:
        super().__init__(placeholder="filter (Enter to keep, Esc to close)", id="filter")
        self.display = False
        self.filters: dict[str, str] = {}  # pane id -> its filter

    def open(self) -> None:
        self.display = True
        self.focus()

    def close(self) -> bool:
        """Clear and hide the box; False when it was not open (Esc means something else)."""
        if not self.display:
            return False
        self.value = ""
        self.display = False
        return True

    def follow(self, pane_id: str) -> None:
        """The pane now in view: show its filter, which its table already applies."""
        text = self.filters.get(pane_id, "")
        with self.prevent(Input.Changed):
            self.value = text
        self.display = bool(text)

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        pane = self.screen.query_one(PaneSwitcher).active()
        self.filters[pane.pane_id] = event.value
        pane.apply_filter(event.value)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.screen.query_one(PaneSwitcher).active().focus_main()
