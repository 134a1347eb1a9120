"""The Compare form ("compare in one go", issue 22): model A, model B or A's int8/int4 build,
items, configs, grid, device. Its Start checks the form (run_form.check_compare_form) and,
when nothing is wrong, hands the plan back; the Compare pane posts it up as `CompareQueued`
(tui/messages.py) and the app starts both runs and opens Compare on the pair. With "stop
when settled" (issue 45) the margin, reference, seed, chunk and budgets are checked too
(run_form.check_sequential_form) and the plan is one `fragility-tui compare A B --items ...`
process, which the Compare pane follows (panes/compare_sequence.py). A modal the Compare
pane pushes itself, as the Runs pane pushes its confirm question.

The grid it proposes is the open one only when that is the user's own (run_form.
proposed_grid): never a synthetic grid, nor a shipped one, which a newer release updates
only while no local run has written into it, nor one with configs imported from another
harness's log (its items are the log's); a shipped grid typed in is warned about once
before Start goes ahead."""

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
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from fragility_tui.devices import DeviceReport, query_devices
from fragility_tui.tui.panes.device_picker import DevicePicker
from fragility_tui.tui.panes.run_form import (ComparePlan, check_compare_form,
                                              check_sequential_form, shipped_grid_note)
from fragility_tui.tui.sanitize import clean

B_BUILDS = [("model B as typed", ""), ("A's int8 build", "int8"), ("A's int4 build", "int4")]


@dataclass
class _Devices(Message):
    report: DeviceReport


BOTH_RUNS = ("Compare in one go: both runs are queued (a one-slot device takes one at a "
             "time); Compare opens on the pair as their batches commit. Esc closes.")
SETTLED = ("Stop when settled: one `compare` process runs both models chunk by chunk until "
           "the answer is clear; Compare follows it. Esc closes.")
# (label, field id, placeholder: the CLI's default), two to a row
SEQUENCE_FIELDS = [("margin", "margin", "2 points"), ("reference", "reference", "o0.letter"),
                   ("seed", "seed", "0"), ("chunk", "chunk", "25 (few items: fewer)"),
                   ("max items", "max-items", "the whole pool"),
                   ("max secs", "max-seconds", "none"), ("max tokens", "max-tokens", "none")]


class TickBox(Checkbox):
    """A checkbox whose mark is a glyph, ✓ ticked and blank not: Textual's draws X either
    way and only shades it, which reads alike without colour (NO_COLOR: grey on grey)."""

    @property
    def BUTTON_INNER(self) -> str:  # noqa: N802 (Textual's name)
        return "✓" if self.value else " "


class CompareFormScreen(ModalScreen[ComparePlan | object | None]):
    """Enter in a field or the Start button checks and starts; Esc closes it unchanged."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", tooltip="Close the Compare form",
                        id="compare-form.cancel")]

    def __init__(self, grid: str, db_path: str | None, synthetic: frozenset[str] = frozenset(),
                 cwd: Path | None = None, settled: bool = False):
        super().__init__()
        self.grid = grid  # proposed: the open grid when it is the user's own, else a new one
        self.db_path = db_path
        self.synthetic = synthetic  # the store's SYNTHETIC grids: no run writes into them
        self.cwd = cwd or Path.cwd()
        self.settled = settled  # opened from the sequence view: "stop when settled" ticked
        self.warned_grid: str | None = None  # the shipped grid Start warned about

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-form-box"):
            yield Static(Text(BOTH_RUNS, style="bold"), id="cf-intro")
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
                yield Label("stop", classes="form-label")
                yield TickBox("when settled (a sequential comparison)", self.settled,
                              id="cf-settled", compact=True)
            with Grid(id="cf-sequence"):
                for label, name, placeholder in SEQUENCE_FIELDS:
                    yield Label(label, classes="form-label")
                    yield Input(placeholder=placeholder, id=f"cf-{name}", compact=True,
                                disabled=not self.settled)
            yield Static("", id="cf-error")
            with Horizontal(id="cf-buttons"):
                yield Button("Start both (Enter)", id="cf-start", variant="primary",
                             compact=True)
                yield Button("Cancel (Esc)", id="cf-cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#cf-model-a", Input).focus()
        self._show_settled(self.settled)
        self._read_devices()

    @work(thread=True, exclusive=True, group="compare-form-devices", exit_on_error=False)
    def _read_devices(self) -> None:
        self.post_message(_Devices(query_devices()))  # never raises: a note instead

    @on(_Devices)
    def _devices(self, message: _Devices) -> None:
        self.query_one(DevicePicker).offer(message.report)

    @on(Checkbox.Changed, "#cf-settled")
    def _settled_changed(self, event: Checkbox.Changed) -> None:
        self._show_settled(event.value)

    def _show_settled(self, settled: bool) -> None:
        for _, name, _ in SEQUENCE_FIELDS:
            self.query_one(f"#cf-{name}", Input).disabled = not settled
        self.query_one("#cf-intro", Static).update(
            Text(SETTLED if settled else BOTH_RUNS, style="bold"))
        self.query_one("#cf-start", Button).label = (
            "Compare (Enter)" if settled else "Start both (Enter)")

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
                "device": self.query_one(DevicePicker).value or "auto",
                "settled": self.query_one("#cf-settled", Checkbox).value,
                **{name.replace("-", "_"): value(name) for _, name, _ in SEQUENCE_FIELDS}}

    def checked(self):
        """(plan, problems) of the form as filled in now."""
        form = self.form()
        check = check_sequential_form if form["settled"] else check_compare_form
        plan, problems = check(form, self.cwd, self.db_path)
        if plan and plan.grid in self.synthetic:
            plan, problems = None, [f"grid: {plan.grid} is SYNTHETIC: name another grid "
                                    "(a new name creates one)"]
        return plan, problems

    @on(Input.Submitted)
    @on(Button.Pressed, "#cf-start")
    def action_start(self) -> None:
        plan, problems = self.checked()
        self.showing_errors = bool(problems)
        if problems:  # nothing started: say what to fix, each problem naming its field
            self.query_one("#cf-error", Static).update(
                Text(clean("; ".join(problems), limit=600), style="bold red"))
            return
        note = shipped_grid_note(plan.grid)
        if note and self.warned_grid != plan.grid:  # once: Start again goes ahead
            self.warned_grid = plan.grid
            self.query_one("#cf-error", Static).update(
                Text(clean(note + "; Start again to go ahead", limit=600), style="bold yellow"))
            return
        self.dismiss(plan)

    showing_errors = False

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Checkbox.Changed)
    def _recheck(self) -> None:
        """A field changed while errors are shown: checked again, so a fixed field's error
        goes instead of staying until the next Start."""
        if not self.showing_errors:
            return
        _, problems = self.checked()
        self.showing_errors = bool(problems)
        self.query_one("#cf-error", Static).update(
            Text(clean("; ".join(problems), limit=600), style="bold red") if problems else
            Text("fixed: Start both (or Enter) starts the runs", style="dim"))

    @on(Button.Pressed, "#cf-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
