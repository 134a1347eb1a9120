"""The Compare form ("compare in one go", issue 22): model A, model B or A's int8/int4 build,
items, configs, grid, device. Its Start checks the form (run_form.check_compare_form) and,
when nothing is wrong, hands the plan back; the Compare pane posts it up as `CompareQueued`
(tui/messages.py) and the app starts both runs and opens Compare on the pair. A modal the
Compare pane pushes itself, as the Runs pane pushes its confirm question."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from fragility_tui.devices import DeviceReport, query_devices
from fragility_tui.tui.panes.device_picker import DevicePicker
from fragility_tui.tui.panes.run_form import ComparePlan, check_compare_form
from fragility_tui.tui.sanitize import clean

B_BUILDS = [("model B as typed", ""), ("A's int8 build", "int8"), ("A's int4 build", "int4")]


@dataclass
class _Devices(Message):
    report: DeviceReport


class CompareFormScreen(ModalScreen[ComparePlan | None]):
    """Enter in a field or the Start button checks and starts; Esc closes it unchanged."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", tooltip="Close the Compare form",
                        id="compare-form.cancel")]

    def __init__(self, grid: str, db_path: str | None, synthetic: frozenset[str] = frozenset(),
                 cwd: Path | None = None):
        super().__init__()
        self.grid = grid  # proposed: the open grid unless it is synthetic
        self.db_path = db_path
        self.synthetic = synthetic  # the store's SYNTHETIC grids: no run writes into them
        self.cwd = cwd or Path.cwd()

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-form-box"):
            yield Static(Text("Compare in one go: both runs are queued (on a one-slot device "
                              "the second waits for the first); Compare opens on the pair and "
                              "fills in as their batches commit. Esc closes.", style="bold"))
            with Grid(id="compare-form"):
                yield Label("model A", classes="form-label")
                yield Input(placeholder="alias, hub id or path", id="cf-model-a", compact=True)
                yield Label("model B", classes="form-label")
                yield Input(placeholder="alias, hub id or path", id="cf-model-b", compact=True)
                yield Label("B is", classes="form-label")
                yield Select(B_BUILDS, value="", allow_blank=False, id="cf-b-build",
                             compact=True)
                yield Label("items", classes="form-label")
                yield Input(placeholder="the shipped starter items", id="cf-items",
                            compact=True)
                yield Label("per bench", classes="form-label")
                yield Input(placeholder="up to 1000 (0: all)", id="cf-sample", type="integer",
                            compact=True)
                yield Label("configs", classes="form-label")
                yield Input(placeholder="all 26", id="cf-configs", compact=True)
                yield Label("grid", classes="form-label")
                yield Input(self.grid, placeholder="grid name", id="cf-grid", compact=True)
                yield Label("device", classes="form-label")
                yield DevicePicker(id="cf-device")
            yield Static("", id="cf-error")
            with Horizontal(id="cf-buttons"):
                yield Button("Start both (Enter)", id="cf-start", variant="primary",
                             compact=True)
                yield Button("Cancel (Esc)", id="cf-cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#cf-model-a", Input).focus()
        self._read_devices()

    @work(thread=True, exclusive=True, group="compare-form-devices", exit_on_error=False)
    def _read_devices(self) -> None:
        self.post_message(_Devices(query_devices()))  # never raises: a note instead

    @on(_Devices)
    def _devices(self, message: _Devices) -> None:
        self.query_one(DevicePicker).offer(message.report)

    @on(Select.Changed, "#cf-b-build")
    def _build_changed(self, event: Select.Changed) -> None:
        # A's own build: model B's field is not read, so it is not offered
        self.query_one("#cf-model-b", Input).disabled = bool(event.value)

    def form(self) -> dict:
        value = lambda name: self.query_one(f"#cf-{name}", Input).value.strip()  # noqa: E731
        return {"model_a": value("model-a"), "model_b": value("model-b"),
                "b_build": self.query_one("#cf-b-build", Select).value or "",
                "items": value("items"), "per_benchmark": value("sample"),
                "configs": value("configs"), "grid": value("grid"),
                "device": self.query_one(DevicePicker).value or "auto"}

    @on(Input.Submitted)
    @on(Button.Pressed, "#cf-start")
    def action_start(self) -> None:
        plan, problems = check_compare_form(self.form(), self.cwd, self.db_path)
        if plan and plan.grid in self.synthetic:
            plan, problems = None, [f"grid: {plan.grid} is SYNTHETIC: name another grid "
                                    "(a new name creates one)"]
        if problems:  # nothing started: say what to fix, each problem naming its field
            self.query_one("#cf-error", Static).update(
                Text(clean("; ".join(problems), limit=600), style="bold red"))
            return
        self.dismiss(plan)

    @on(Button.Pressed, "#cf-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
