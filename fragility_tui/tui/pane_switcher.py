"""The panes under the tabs, one shown at a time (a ContentSwitcher that knows its panes)."""

from __future__ import annotations

from typing import TypeVar

from textual.widgets import ContentSwitcher

from fragility_tui.tui.panes import Pane

P = TypeVar("P", bound=Pane)


class PaneSwitcher(ContentSwitcher):
    """The hidden panes mount after the first frame: one asked for before it has mounted is
    remembered (`pending`) and shown when its PaneMounted arrives."""

    def __init__(self) -> None:
        super().__init__(initial="grids", id="panes")
        self.pending: str | None = None

    def pane(self, pane_id: str) -> Pane:
        return self.query_one(f"#{pane_id}", Pane)

    def pane_of(self, kind: type[P]) -> P:
        return self.query_one(kind)

    def active(self) -> Pane:
        return self.pane(self.current or "grids")

    def show(self, pane_id: str) -> Pane | None:
        """Show the pane, up to date, focused (Pane.focus_on_open); None when it has not
        mounted yet."""
        if not self.query(f"#{pane_id}"):
            self.pending = pane_id
            return None
        self.pending = None
        if self.current != pane_id:
            self.current = pane_id
        pane = self.pane(pane_id)
        if pane.stale:
            pane.refresh_pane()
        pane.focus_on_open()
        return pane
