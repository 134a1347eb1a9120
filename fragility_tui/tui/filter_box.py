"""The `/` filter box under the panes: what is typed narrows the main table of the pane in
view (drill-down screens have filters of their own)."""

from __future__ import annotations

from textual import on
from textual.widgets import Input

from fragility_tui.tui.pane_switcher import PaneSwitcher


class FilterBox(Input):
    """Hidden until `/`; Enter keeps the filter and goes back to the table, Esc clears it."""

    def __init__(self) -> None:
        super().__init__(placeholder="filter (Enter to keep, Esc to close)", id="filter")
        self.display = False

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

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        self.screen.query_one(PaneSwitcher).active().apply_filter(event.value)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.screen.query_one(PaneSwitcher).active().focus_main()
