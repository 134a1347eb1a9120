"""A yes/no question over the app, for actions that change a run (cancel, resume): a modal
the panes push themselves (they sit beside screens/, not above it)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from fragility_tui.tui.sanitize import clean


class ConfirmScreen(ModalScreen[bool]):
    """Ask before an action that changes a run (cancel, resume): y or Enter on Yes confirms,
    n or Esc declines. Its result is True only for an explicit yes."""

    BINDINGS = [Binding("y", "answer(True)", "Yes", id="confirm.yes"),
                Binding("n,escape", "answer(False)", "No", id="confirm.no")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(Text(clean(self.question, limit=400)), id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button("Yes (y)", id="confirm-yes", variant="warning")
                yield Button("No (n, Esc)", id="confirm-no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()  # Enter alone never confirms

    @on(Button.Pressed, "#confirm-yes")
    def _yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-no")
    def _no(self) -> None:
        self.dismiss(False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
