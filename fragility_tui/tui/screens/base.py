"""Drill-down screens' base: a pushed view that Esc (or q) pops; / filters its table."""

from __future__ import annotations


from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input, Static

from fragility_tui.tui.chrome import FittingFooter
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import TABLES




# ---------------------------------------------------------------- drill-down base
class DrillScreen(Screen):
    """A pushed view: Esc (or q) goes back; / filters its table; the app's keys still work."""

    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back to the previous view", id="drill.back"),
        Binding("slash", "filter", "Filter", tooltip="Filter this view's table",
                id="drill.filter"),
    ]

    def compose_header(self) -> ComposeResult:
        yield Static("", classes="drill-title")

    def set_title(self, text: str) -> None:
        self.query_one(".drill-title", Static).update(Text(clean(text, one_line=True, limit=300),
                                                           style="bold"))

    def compose_footer(self) -> ComposeResult:
        yield Input(placeholder="filter rows (Esc closes)", classes="drill-filter")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.query_one(".drill-filter", Input).display = False

    def action_back(self) -> None:
        box = self.query_one(".drill-filter", Input)
        if box.display and box.has_focus:
            box.display = False
            self._focus_table()
            return
        self.app.pop_screen()

    def action_filter(self) -> None:
        box = self.query_one(".drill-filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, ".drill-filter")
    def _filter(self, event: Input.Changed) -> None:
        tables = list(self.query(TABLES))
        if tables:
            tables[0].set_filter(event.value)
            tables[0].border_subtitle = Text(tables[0].caption_text)

    @on(Input.Submitted, ".drill-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self._focus_table()

    def _focus_table(self) -> None:
        tables = list(self.query(TABLES))
        if tables:
            tables[0].focus()
