"""Pane 7: evaluation runs — status, progress, tokens/s, ETA; start, cancel, resume.

A run is a detached `fragility-tui run …` process in its own session, so it survives the app
(and a dropped SSH connection) closing. The pane never imports torch: it only reads the
store's run records (RunRecord, by attribute) and tails each run's JSON-lines events file,
once a second.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Label, Select, Static

from fragility_tui.backends import DEFAULT_BACKEND, backend_info, backend_names
from fragility_tui.devices import DeviceReport, query_devices
from fragility_tui.processes import (RunProgress, db_args, failure_line, launch_detached,
                                     log_dir, run_progress)
from fragility_tui.store.runs import RunRecord, RunStatus
from fragility_tui.tui.confirm import ConfirmScreen
from fragility_tui.tui.messages import RunsWrote, ShowRun
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.panes.device_picker import DevicePicker
from fragility_tui.tui.panes.run_form import (ENDPOINTS, check_run_form, open_grid_configs,
                                              proposed_grid, run_argv, shipped_grid_note)
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import Column, FormKeys, ReportTable, hbar

# progress and ETA come right after the run id: at 80 columns the columns after the model
# name are off-screen, and how far a run is matters most while watching it; a long model
# name is cut in the middle, so an int4 and an int8 build stay apart there
COLUMNS = [Column("run"), Column("progress", "rich"), Column("ETA"), Column("status"),
           Column("model", "name", 22), Column("grid", "name", 22), Column("device"),
           Column("done", "int"), Column("total", "int"), Column("tok/s", "rate"),
           Column("started")]
QUANTISE = [("no quantisation", ""), ("int8 (optimum-quanto)", "int8"),
            ("int4 (optimum-quanto)", "int4")]
REFRESH_SECONDS = 1.0
DEVICE_REFRESH_SECONDS = 5.0  # one nvidia-smi call (or NVML read) in a worker thread
# the openai backend's fields: (label, input id, placeholder), shown only with it
SERVED_FIELDS = [("base URL", "base-url", "http://127.0.0.1:8000/v1"),
                 ("served as", "served-model", "model id in /v1/models"),
                 ("key var", "api-key-env", "env variable (not the key)")]
FINAL_STATUSES = RunStatus.final()
# What `u` offers to resume: a run that stopped before its end (or whose process is gone).
RESUMABLE = (RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.DIED)


@dataclass
class RunsUpdated(Message):
    """The runs as last read, or why they could not be read (the table keeps its rows)."""

    runs: list[RunProgress]
    error: str | None = None


@dataclass
class DevicesUpdated(Message):
    """The CPU and GPUs as last read (devices.py), for the strip and the form's choice."""

    report: DeviceReport


def fmt_eta(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class RunForm(FormKeys, Grid):
    """The new-run form: label, field, label, field (readable at 80 columns)."""


class RunsPane(Pane, pane_id="runs", title="Runs"):
    help = ("Runs are detached processes: they keep going when the app closes. "
            "Enter: provenance · k: cancel · u: resume · n: new run form.")
    needs_view = False
    BINDINGS = [
        Binding("k", "cancel_run", "Cancel run", tooltip="Cancel the selected run",
                id="runs.cancel"),
        Binding("u", "resume_run", "Resume run", tooltip="Resume the selected run",
                id="runs.resume"),
        Binding("n", "new_run", "New run", tooltip="Focus the form to start a run", id="runs.new"),
    ]

    def compose_body(self) -> ComposeResult:
        yield Static("devices: reading…", id="devices-strip", markup=False)
        yield ReportTable(table_name="runs", id="runs-table")
        with RunForm(id="run-form"):
            yield Label("model", classes="form-label")
            yield Input(placeholder="alias, hub id or path", id="run-model",
                        compact=True)
            yield Label("items", classes="form-label")
            yield Input(placeholder="the shipped starter items", id="run-items", compact=True)
            yield Label("grid", classes="form-label")
            yield Input(placeholder="grid name", id="run-grid", compact=True)
            yield Label("per bench", classes="form-label")
            yield Input(placeholder="up to 1000 (0: all)", id="run-sample", type="integer",
                        compact=True)  # run --per-benchmark's default (SPEC 1)
            yield Label("configs", classes="form-label")
            yield Input(placeholder="paper (the 26); lik, paper+nobos, o0.letter.lik+chat",
                        id="run-configs", compact=True)
            yield Label("quantise", classes="form-label")
            yield Select(QUANTISE, value="", allow_blank=False, id="run-quantize", compact=True)
            yield Label("device", classes="form-label")
            yield DevicePicker(id="run-device")
            yield Label("backend", classes="form-label")
            yield Select([(b, b) for b in backend_names()], value=DEFAULT_BACKEND,
                         allow_blank=False, id="run-backend", compact=True)
            for label, field_id, placeholder in SERVED_FIELDS:
                yield Label(label, classes="form-label served")
                yield Input(placeholder=placeholder, id=f"run-{field_id}", compact=True,
                            classes="served")
            yield Label("endpoint", classes="form-label served")
            yield Select([(e, e) for e in ENDPOINTS], value="completions", allow_blank=False,
                         id="run-endpoint", compact=True, classes="served")
            yield Label("flags", classes="form-label")
            yield Input(placeholder="e.g. --batch-size 8", id="run-extra",
                        compact=True)
            yield Label("", classes="form-label")
            yield Button("Start run", id="run-start", variant="primary", compact=True)
        yield Static("", id="run-note")

    def on_mount(self) -> None:
        self.runs: list[RunProgress] = []
        self.launched: list[tuple] = []  # (process, log, what) until each has exited
        self.warned_grid: str | None = None  # the shipped grid Start warned about
        self.proposed: str | None = None  # the grid field's last proposal (proposed_grid)
        self.form_error = False  # the note shows the form's errors: checked again on a change
        self.set_interval(REFRESH_SECONDS, self._tick)
        self.set_interval(DEVICE_REFRESH_SECONDS, self.poll_devices)
        self.poll_devices()
        self._show_served_fields()

    @on(Select.Changed, "#run-backend")
    def _backend_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._show_served_fields()

    def _show_served_fields(self) -> None:
        """The served model's fields (URL, id, key variable, endpoint) only for a backend
        that evaluates a model a server serves."""
        served = backend_info(self.query_one("#run-backend", Select).value).server_flags
        for widget in self.query(".served"):
            widget.display = served
        self.query_one("#run-form").set_class(served, "served-form")
        self.query_one("#run-model", Input).placeholder = (
            "local tokenizer (optional)" if served else "alias, hub id or path")

    def render_view(self, view) -> None:
        grid_input = self.query_one("#run-grid", Input)
        # The open grid is proposed as the target when it is the user's own, else a new
        # grid: a run's cells never go into simulated ones (the runner refuses them too),
        # and a newcomer's first runs not into the shipped real grid. The proposal follows
        # the open grid (and its configs, once computed) until the user types another.
        if grid_input.value in ("", self.proposed) and self.grids is not None:
            self.proposed = proposed_grid(self.grid_name,
                                          {g.name for g in self.grids if g.synthetic},
                                          open_grid_configs(self.view, self.grid_name))
            grid_input.value = self.proposed
        self._show_runs()
        self.poll()

    def _synthetic(self, name: str) -> bool:
        return any(g.name == name and g.synthetic for g in self.grids or [])

    def _tick(self) -> None:
        self._check_launched()
        if self.display:  # the pane switcher hides the panes not shown
            self.poll()

    def _check_launched(self) -> None:
        """A launched command that failed says why here (a run refused before it starts,
        e.g. a model already in the grid under other settings, leaves no run row)."""
        running = []
        for proc, log, what in self.launched:
            code = proc.poll()
            if code is None:
                running.append((proc, log, what))
            elif code == 130:  # the run stopped on a cancel: not a failure
                self.note(f"{what}: cancelled; `u` on its row resumes it")
            elif code != 0:
                self.note(f"{what} failed (exit {code}): {failure_line(log)}", error=True)
                # also where the user is: a Compare form's runs are watched from Compare
                self.notify(clean(f"{what} failed (exit {code}): {failure_line(log)}",
                                  limit=400), title="Run not started", severity="error",
                            markup=False, timeout=10)
        self.launched = running

    @work(thread=True, exclusive=True, group="runs", exit_on_error=False)
    def poll(self) -> None:
        try:
            runs = [run_progress(r) for r in self.gateway.runs()]
        except Exception as exc:  # e.g. the store busy for too long: say so, try next tick
            self.post_message(RunsUpdated([], error=f"could not read the runs: {exc}"))
            return
        self.post_message(RunsUpdated(runs))

    @work(thread=True, exclusive=True, group="devices", exit_on_error=False)
    def poll_devices(self) -> None:
        self.post_message(DevicesUpdated(query_devices()))  # never raises: a note instead

    @on(DevicesUpdated)
    def _devices_updated(self, message: DevicesUpdated) -> None:
        report = message.report
        lines = [d.summary() for d in report.devices]
        if report.gpu_note:
            lines.append(report.gpu_note)
        self.query_one("#devices-strip", Static).update(
            clean(" · ".join(lines), one_line=True, limit=600))
        self.query_one(DevicePicker).offer(report)

    @on(RunsUpdated)
    def _runs_updated(self, message: RunsUpdated) -> None:
        if message.error is not None:
            self.note(message.error, error=True)
            return
        before = {p.run.run_id: (p.status, p.done) for p in self.runs}
        self.runs = message.runs
        self._show_runs()
        changed = {p.run.grid for p in self.runs
                   if before.get(p.run.run_id, (None, None)) != (p.status, p.done)
                   and p.status in FINAL_STATUSES}
        if changed:  # new cells landed: refresh the grid list and the open grid
            self.post_message(RunsWrote(changed))

    def _show_runs(self) -> None:
        rows = []
        for p in self.runs:
            run = p.run
            bar = hbar(p.done / p.total if p.total else None, 12)
            rows.append((str(run.run_id),
                         [run.run_id, bar, fmt_eta(p.eta),
                          status_text(p.status, run.error, run.note, p.retrying),
                          run.model, run.grid,
                          run.shown_device or "", p.done, p.total, p.tok_s, run.started_at]))
        table = self.query_one(ReportTable)
        table.set_data(COLUMNS, rows)
        table.border_title = "Runs (refreshed every second)"
        self.update_caption()

    def selected_progress(self) -> RunProgress | None:
        key = self.query_one(ReportTable).current_key()
        return next((p for p in self.runs if str(p.run.run_id) == key), None)

    def selected_run(self) -> RunRecord | None:
        progress = self.selected_progress()
        return progress.run if progress else None

    # ---------------------------------------------------------------- actions
    @on(Input.Submitted, "#run-form Input")
    @on(Button.Pressed, "#run-start")
    def action_start_run(self) -> None:
        """The Start button, or Enter in any of the form's fields."""
        form, problems = self._checked_form()
        if problems:  # nothing launched, no run row: say what to fix
            self.note("; ".join(problems), error=True)
            self.form_error = True
            return
        warning = shipped_grid_note(form.get("grid"))
        if warning and self.warned_grid != form["grid"]:  # once: Start again goes ahead
            self.warned_grid = form["grid"]
            self.note(warning + "; Start again to go ahead", error=True)
            return
        self.launch(run_argv(form, self.db_path),
                    f"start {form.get('served_model') or form['model']}")
        self.focus_main()  # Enter now opens a run's card instead of starting another run

    @on(Input.Changed, "#run-form Input")
    @on(Select.Changed, "#run-form Select")
    def _recheck(self) -> None:
        """A field changed while the form's errors are shown: checked again, so a corrected
        field's error goes (it stayed until the next Start: `model: './ckpts/x' is not an
        alias…` beside a model that now is one)."""
        if not self.form_error:
            return
        _, problems = self._checked_form()
        if problems:
            self.note("; ".join(problems), error=True)
            self.form_error = True
        else:
            self.note("the form's errors are fixed: Start (or Enter) starts the run")

    def _checked_form(self) -> tuple[dict, list[str]]:
        """The form's fields, checked (check_run_form), and what is wrong with them."""
        value = lambda name: self.query_one(f"#run-{name}", Input).value.strip()  # noqa: E731
        form = {"model": value("model"), "items": value("items"), "grid": value("grid"),
                "per_benchmark": value("sample"), "configs": value("configs"),
                "extra": value("extra"),
                "quantize": self.query_one("#run-quantize", Select).value or "",
                "device": self.query_one(DevicePicker).value or "auto",
                "backend": self.query_one("#run-backend", Select).value or DEFAULT_BACKEND}
        if backend_info(form["backend"]).server_flags:
            form.update(base_url=value("base-url"), served_model=value("served-model"),
                        api_key_env=value("api-key-env"),
                        endpoint=self.query_one("#run-endpoint", Select).value)
        form, problems = check_run_form(form, Path.cwd())
        if form.get("grid") and self._synthetic(form["grid"]):
            problems = [*problems, f"grid {form['grid']} is SYNTHETIC: name another grid "
                        "(a new name creates one)"]
        return form, problems

    def _selected_for(self, statuses, action: str, *, error: bool = True):
        """(run, progress) of the selected run when its status allows `action`; otherwise
        a note says why not and None is returned."""
        run = self.selected_run()
        if run is None:
            self.note("no run selected", error=True)
            return None
        progress = self.selected_progress()
        if progress.status not in statuses:
            self.note(f"run {run.run_id} is {progress.status}: nothing to {action}", error=error)
            return None
        return run, progress

    def action_cancel_run(self) -> None:
        chosen = self._selected_for((*RunStatus.active(), RunStatus.QUEUED), "cancel",
                                    error=False)
        if chosen is None:
            return
        run, _ = chosen
        argv = ["runs", "cancel", str(run.run_id)] + db_args(self.db_path)
        self.confirm(f"Cancel run {run.run_id} ({run.model} on {run.grid})? "
                     "It stops after its current batch; `u` resumes it later.",
                     argv, f"cancel {run.run_id}")

    def action_resume_run(self) -> None:
        chosen = self._selected_for(RESUMABLE, "resume")  # a finished run has nothing to resume
        if chosen is None:
            return
        run, progress = chosen
        argv = ["run", "--resume", str(run.run_id), "--display", "none"] + db_args(
            self.db_path)
        self.confirm(f"Resume run {run.run_id} ({run.model} on {run.grid}, "
                     f"{progress.done}/{progress.total} cells)? It starts a "
                     "process that computes the missing cells.", argv, f"resume {run.run_id}")

    def confirm(self, question: str, argv: list[str], what: str) -> None:
        """Launch only after an explicit yes (a stray key never changes a run)."""
        def answered(yes: bool | None) -> None:
            if yes:
                self.launch(argv, what)
            else:
                self.note(f"{what}: not done")

        self.app.push_screen(ConfirmScreen(question), answered)

    def action_new_run(self) -> None:
        self.query_one("#run-model", Input).focus()

    def launch(self, argv: list[str], what: str) -> str | None:
        """Start `fragility-tui ARGV` detached and watch it; why it could not start (said
        here too), or None."""
        log = log_dir(self.db_path) / f"tui-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        try:
            proc = launch_detached(argv, log)
        except OSError as exc:
            self.note(f"could not {what}: {exc}", error=True)
            return f"{what} could not start: {exc}"
        self.launched.append((proc, log, what))
        self.note(f"{what}: process {proc.pid} started, log {log}")
        self.poll()
        return None

    def note(self, text: str, error: bool = False) -> None:
        self.form_error = False  # another note replaces the form's errors
        self.query_one("#run-note", Static).update(
            Text(clean(text, one_line=True, limit=400), style="red" if error else "dim"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        run = self.selected_run()
        if run is not None:
            self.post_message(ShowRun(run))


def status_text(status, error: str | None = None, note: str | None = None,
                retrying: str | None = None) -> Text:
    """The status, and for a failed run its reason (the whole reason: Enter on the row),
    for a queued one what it waits for, for a running one the request it waits to retry
    (a served model's: "retrying item q3, config o0.letter in 2.0 s: server said HTTP
    503: busy (attempt 2 of 6)"), gone once the request is answered."""
    styles = {RunStatus.RUNNING: "bold cyan", RunStatus.FINISHED: "green",
              RunStatus.QUEUED: "yellow",
              RunStatus.CANCELLING: "yellow", RunStatus.CANCELLED: "yellow",
              RunStatus.FAILED: "bold red", RunStatus.DIED: "bold red"}
    text = Text(clean(status, one_line=True, limit=40), style=styles.get(str(status), ""))
    if error and status == RunStatus.FAILED:
        text.append(": " + clean(error, one_line=True, limit=300), style="red")
    if note and status == RunStatus.QUEUED:
        text.append(": " + clean(note, one_line=True, limit=300), style="yellow")
    if retrying and status == RunStatus.RUNNING:
        text.append(": " + clean(retrying, one_line=True, limit=300), style="yellow")
    return text