"""Pane 7: evaluation runs — status, progress, tokens/s, ETA; start, cancel, resume.

A run is a detached `fragility-tui run …` process in its own session, so it survives the app
(and a dropped SSH connection) closing. The pane never imports torch: it only reads the
store's run rows and tails each run's JSON-lines events file, once a second.
"""

from __future__ import annotations

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

from fragility_tui.jobs import (RunStatus, check_run_form, db_args, failure_line,
                                launch_detached, log_dir, merge_progress, run_argv)
from fragility_tui.tui.confirm import ConfirmScreen
from fragility_tui.tui.messages import RunsWrote, ShowRun
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import Column, FormKeys, ReportTable, hbar

COLUMNS = [Column("run"), Column("model"), Column("grid"), Column("status"),
           Column("done", "int"), Column("total", "int"), Column("progress", "rich"),
           Column("tok/s", "rate"), Column("ETA"), Column("started")]
QUANTISE = [("no quantisation", ""), ("int8 (optimum-quanto)", "int8"),
            ("int4 (optimum-quanto)", "int4")]
REFRESH_SECONDS = 1.0
FINAL_STATUSES = RunStatus.final()
# What `u` offers to resume: a run that stopped before its end (or whose process is gone).
RESUMABLE = (RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.DIED)


@dataclass
class RunsUpdated(Message):
    runs: list  # list[dict] with progress folded in


def fmt_eta(seconds: float | None) -> str:
    if seconds is None:
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
            yield Input(placeholder="all items", id="run-sample", type="integer", compact=True)
            yield Label("configs", classes="form-label")
            yield Input(placeholder="all 26", id="run-configs", compact=True)
            yield Label("quantise", classes="form-label")
            yield Select(QUANTISE, value="", allow_blank=False, id="run-quantize", compact=True)
            yield Label("flags", classes="form-label")
            yield Input(placeholder="e.g. --batch-size 8", id="run-extra",
                        compact=True)
            yield Label("", classes="form-label")
            yield Button("Start run", id="run-start", variant="primary", compact=True)
        yield Static("", id="run-note")

    def on_mount(self) -> None:
        self.runs: list[dict] = []
        self.launched: list[tuple] = []  # (process, log, what) until each has exited
        self.set_interval(REFRESH_SECONDS, self._tick)

    def render_view(self, view) -> None:
        grid_input = self.query_one("#run-grid", Input)
        # The open grid is proposed as the target unless it is synthetic: a run's cells
        # never go into simulated ones (the runner refuses them too).
        if not grid_input.value and self.grid_name and not self._synthetic(self.grid_name):
            grid_input.value = self.grid_name
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
        self.launched = running

    @work(thread=True, exclusive=True, group="runs", exit_on_error=False)
    def poll(self) -> None:
        try:
            runs = [merge_progress(dict(r)) for r in self.gateway.list_runs()]
        except Exception as exc:
            self.post_message(RunsUpdated([{"run_id": "?", "status": f"error: {exc}"}]))
            return
        self.post_message(RunsUpdated(runs))

    @on(RunsUpdated)
    def _runs_updated(self, message: RunsUpdated) -> None:
        before = {r.get("run_id"): (r.get("status"), r.get("done")) for r in self.runs}
        self.runs = message.runs
        self._show_runs()
        changed = {r.get("grid") for r in self.runs
                   if before.get(r.get("run_id"), (None, None)) != (r.get("status"), r.get("done"))
                   and r.get("status") in FINAL_STATUSES}
        if changed:  # new cells landed: refresh the grid list and the open grid
            self.post_message(RunsWrote(changed))

    def _show_runs(self) -> None:
        rows = []
        for r in self.runs:
            done, total = r.get("done") or 0, r.get("total") or 0
            bar = hbar(done / total if total else None, 12)
            rows.append((str(r.get("run_id")),
                         [r.get("run_id"), r.get("model"), r.get("grid"),
                          status_text(r.get("status"), r.get("error")),
                          done, total, bar, r.get("tok_s"), fmt_eta(r.get("eta")),
                          r.get("started_at")]))
        table = self.query_one(ReportTable)
        table.set_data(COLUMNS, rows)
        table.border_title = "Runs (refreshed every second)"
        self.update_caption()

    def selected_run(self) -> dict | None:
        key = self.query_one(ReportTable).current_key()
        return next((r for r in self.runs if str(r.get("run_id")) == key), None)

    # ---------------------------------------------------------------- actions
    @on(Button.Pressed, "#run-start")
    def action_start_run(self) -> None:
        value = lambda name: self.query_one(f"#run-{name}", Input).value.strip()  # noqa: E731
        form = {"model": value("model"), "items": value("items"), "grid": value("grid"),
                "per_benchmark": value("sample"), "configs": value("configs"),
                "extra": value("extra"),
                "quantize": self.query_one("#run-quantize", Select).value or ""}
        form, problems = check_run_form(form, Path.cwd())
        if form.get("grid") and self._synthetic(form["grid"]):
            problems = [*problems, f"grid {form['grid']} is SYNTHETIC: name another grid "
                        "(a new name creates one)"]
        if problems:  # nothing launched, no run row: say what to fix
            self.note("; ".join(problems), error=True)
            return
        self.launch(run_argv(form, self.db_path), f"start {form['model']}")
        self.focus_main()  # Enter now opens a run's card instead of starting another run

    def action_cancel_run(self) -> None:
        run = self.selected_run()
        if run is None:
            self.note("no run selected", error=True)
            return
        if run.get("status") not in (*RunStatus.active(), RunStatus.QUEUED):
            self.note(f"run {run['run_id']} is {run.get('status')}: nothing to cancel")
            return
        argv = ["runs", "cancel", str(run["run_id"])] + db_args(self.db_path)
        self.confirm(f"Cancel run {run['run_id']} ({run.get('model')} on {run.get('grid')})? "
                     "It stops after its current batch; `u` resumes it later.",
                     argv, f"cancel {run['run_id']}")

    def action_resume_run(self) -> None:
        run = self.selected_run()
        if run is None:
            self.note("no run selected", error=True)
            return
        if run.get("status") not in RESUMABLE:  # a finished run has nothing to resume
            self.note(f"run {run['run_id']} is {run.get('status')}: nothing to resume",
                      error=True)
            return
        argv = ["run", "--resume", str(run["run_id"]), "--display", "none"] + db_args(
            self.db_path)
        self.confirm(f"Resume run {run['run_id']} ({run.get('model')} on {run.get('grid')}, "
                     f"{run.get('done') or 0}/{run.get('total') or 0} cells)? It starts a "
                     "process that computes the missing cells.", argv, f"resume {run['run_id']}")

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

    def launch(self, argv: list[str], what: str) -> None:
        log = log_dir(self.db_path) / f"tui-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        try:
            proc = launch_detached(argv, log)
        except OSError as exc:
            self.note(f"could not {what}: {exc}", error=True)
            return
        self.launched.append((proc, log, what))
        self.note(f"{what}: process {proc.pid} started, log {log}")
        self.poll()

    def note(self, text: str, error: bool = False) -> None:
        self.query_one("#run-note", Static).update(
            Text(clean(text, one_line=True, limit=400), style="red" if error else "dim"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        run = self.selected_run()
        if run is not None:
            self.post_message(ShowRun(run))


def status_text(status, error: str | None = None) -> Text:
    """The status, and for a failed run its reason (the whole reason: Enter on the row)."""
    styles = {RunStatus.RUNNING: "bold cyan", RunStatus.FINISHED: "green",
              RunStatus.CANCELLING: "yellow", RunStatus.CANCELLED: "yellow",
              RunStatus.FAILED: "bold red", RunStatus.DIED: "bold red"}
    text = Text(clean(status, one_line=True, limit=40), style=styles.get(str(status), ""))
    if error and status == RunStatus.FAILED:
        text.append(": " + clean(error, one_line=True, limit=300), style="red")
    return text