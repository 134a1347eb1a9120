"""The Compare pane's sequential comparison (issue 45): the sequence narrowing as items
arrive, for the comparison a Compare form started with "stop when settled" (followed from
the grid's stored cells as the live watcher reloads them: tui/sequence.live_state) and, with
`v`, for any picked pair replayed over the grid's recorded cells (`compare A B --grid`:
tui/sequence.replay_state; with the settings of the pair's recorded comparison, else the
form's, tui/sequence.replay_settings). What it shows: the verdict line (winner / equivalent
/ budget / pool exhausted, items used, and the share of the pool saved only for a settled
live verdict, as `compare` says it), a plot of Δ̂ and its confidence sequence against the
items done with the ±m margin and the stopping point, and the path as a table (a row per
chunk). At 80x24 the table shows first and `g` swaps in the plot, as for the full grid's
decision.

No seed shopping (issue 58), as `compare` does it (services/comparisons.py): a replay is
recorded as the pair's first comparison in the grid when it is the first (a live one by
its own `compare` process), and a comparison that is not the first (another seed or
reference) shows under its verdict the first one's verdict, which stands, and that this one
is not independent evidence."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.message import Message
from textual.widgets import Static

from fragility_tui.tui.messages import WorkFailed
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.sequence import (FINISHED, RUNNING, SequencePlan, SequenceSettings,
                                        SequenceState, comparison_json, comparison_runs,
                                        first_comparison_line, live_state, points, path_rows,
                                        pool_of, replay_settings, replay_state,
                                        settings_line, verdict_line)
from fragility_tui.tui.widgets import Column, ReportTable

SEQUENCE_COLUMNS = [Column("items", "int"), Column("Δ̂ points", "pts"), Column("low", "pts"),
                    Column("high", "pts"), Column("reading")]
PROCESS_POLL_SECONDS = 2.0  # how often a followed comparison's process is looked at
PLOT_TITLE = "● Δ̂ (A − B)  │ sequence  ╌ ±m  ┊ stop — against items done"
SEQUENCE_TITLE = "The sequence per chunk: items done, Δ̂ and its band, reading"


@dataclass
class SequenceReady(Message):
    view: object
    a: str
    b: str
    state: SequenceState


class SequenceMixin:
    """For the Compare pane: `sequence_on` switches the pane from the full grid's decision to
    the sequential comparison of the picked pair."""

    sequence_on = False
    following: SequencePlan | None = None  # the comparison a Compare form started
    process = None  # its process (subprocess.Popen), when this app started it
    exit_code: int | None = None  # its exit status once it has ended
    _process_timer = None
    _pools: dict | None = None

    def follow(self, plan: SequencePlan, process=None) -> None:
        """Show the plan's comparison as its cells are stored (a Compare form's "stop when
        settled")."""
        self.following, self.process, self.exit_code = plan, process, None
        self.sequence_on = True
        if self._process_timer is None:
            self._process_timer = self.set_interval(PROCESS_POLL_SECONDS, self._poll_process)

    def _poll_process(self) -> None:
        """A comparison that stops between chunks (a budget, a failure) writes no cell: its
        exit is what tells the pane to look again."""
        if self.process is None or self.exit_code is not None:
            return
        code = self.process.poll()
        if code is not None:
            self.exit_code = code
            if self.sequence_on:
                self.compare()

    def action_sequence(self) -> None:
        self.sequence_on = not self.sequence_on
        self.compare()

    def live_plan(self, view, a, b) -> SequencePlan | None:
        p = self.following
        return p if p is not None and view.grid == p.grid and (a, b) == (p.a, p.b) else None

    def start_sequence(self, view, a: str, b: str) -> None:
        plan = self.live_plan(view, a, b)
        p = self.following
        if plan is None and p is not None and view.grid == p.grid and \
                not {p.a, p.b} <= set(view.cube.models):
            # the followed grid before both models have cells (the pickers cannot hold the
            # pair yet): a replay of whatever pair they hold would be a verdict on nothing
            self.query_one("#compare-result", Static).update(Text(
                f"following the comparison of {p.a} and {p.b}: waiting for both models' "
                "first cells…", style="italic"))
            self.query_one("#compare-calibration", Static).update("")
            self.clear_figures(True)
            return
        self.query_one("#compare-result", Static).update(
            Text("following the comparison…" if plan else "replaying the sequence…",
                 style="italic"))
        self.query_one("#compare-calibration", Static).update("")
        self._sequence(view, a, b, plan, self.exit_code if plan else None)

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def _sequence(self, view, a: str, b: str, plan, exit_code) -> None:
        try:
            if plan is None:
                state = replay_state(view.cube, a, b, self._replay_settings(view, a, b))
            else:
                runs = comparison_runs(self.gateway.runs(), plan)
                state = live_state(view.full, plan, runs, self._pool(runs), exit_code)
            self._first_comparison(view, state)
        except Exception as exc:
            self.post_message(WorkFailed(f"the sequential comparison of {a} and {b}",
                                         f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(SequenceReady(view, a, b, state))

    def _replay_settings(self, view, a: str, b: str) -> SequenceSettings:
        """`v`'s settings: the pair's recorded comparison's, else the form's comparison's in
        this grid, else compare's defaults (tui/sequence.replay_settings)."""
        from fragility_tui.errors import StoreBusyError

        try:
            records = self.gateway.comparisons(view.grid, a, b, "observed")
        except StoreBusyError:  # another process's long write: the defaults, no record
            records = []
        p = self.following
        form = p.settings if p is not None and p.grid == view.grid else None
        return replay_settings(records, view.cube.reference, form)

    def _first_comparison(self, view, state: SequenceState) -> None:
        """No seed shopping (issue 58), as `compare` does it: a replay computed here is
        recorded as the pair's first comparison when it is one (the CLI's replay records
        its own); a live comparison is recorded by its `compare` process and only read
        here. Either way the state learns whether it is the first."""
        from fragility_tui.errors import StoreBusyError

        out = comparison_json(state)
        if out is None or not {state.a, state.b} <= set(view.cube.models):
            return  # nothing compared (no pool, or a pair the view does not hold)
        try:
            self.gateway.first_comparison(view.grid, out, state.live, record=not state.live)
        except StoreBusyError:  # shown without the line rather than not at all
            return
        state.first, state.independent = out["first_comparison"], out["independent_evidence"]

    def _pool(self, runs):
        """The pool the comparison's runs drew (loaded once per item set and seed)."""
        if not runs:
            return None
        spec = runs[0].spec
        key = (tuple(spec["items"]), spec.get("per_benchmark"), spec.get("seed"))
        if self._pools is None:
            self._pools = {}
        if key not in self._pools:
            self._pools[key] = pool_of(spec)
        return self._pools[key]

    def on_sequence_ready(self, message: SequenceReady) -> None:
        # by name, not @on: Textual registers @on handlers of the class it builds, not of a
        # plain mixin
        message.stop()
        if message.view is not self.view or not self.sequence_on or \
                self._picked_pair() != (message.a, message.b):
            return  # an answer to an older question
        state = message.state
        self.query_one("#compare-result", Static).update(sequence_text(state))
        from fragility_tui.tui.plots import draw_sequence

        plot = self.query_one("#compare-plot")
        r = state.result
        draw_sequence(plot, r.path if r else [], r.margin if r else state.settings.margin / 100,
                      r.pool if r else 0, r.items_used if r is not None and state.stop else None)
        plot.border_title = PLOT_TITLE
        table = self.query_one(ReportTable)
        table.set_data(SEQUENCE_COLUMNS, [(str(row[0]), row) for row in path_rows(state)])
        table.border_title = SEQUENCE_TITLE
        self.update_caption()
        self.apply_plot_layout()


def sequence_text(state: SequenceState) -> Text:
    """The pair, the verdict (or how the comparison stands), the last sequence and cost,
    and the settings: four lines at 80 columns; two more under the verdict when this is
    not the pair's first comparison (the first one's verdict, which stands)."""
    text = Text()
    text.append("A ", style="bold")
    text.append(clean(state.a, one_line=True, limit=60))
    text.append("  vs  B ", style="bold")
    text.append(clean(state.b, one_line=True, limit=60))
    text.append("\n")
    r, stop = state.result, state.stop
    style = ("bold green" if stop in ("winner", "equivalent") or
             (r is not None and r.settled and stop) else
             "bold yellow" if state.status in (RUNNING, FINISHED) else "bold red")
    text.append(clean(verdict_line(state), one_line=True, limit=300), style=style)
    text.append("\n")
    first = first_comparison_line(state)  # not the pair's first comparison: which stands
    if first:
        text.append(clean(first, one_line=True, limit=400) + "\n", style="yellow")
    last = r.final if r is not None else None
    parts = []
    if last is not None:
        parts.append(f"{'at the stop' if stop else 'so far'}: Δ̂ {points(last.delta)} "
                     f"[{points(last.lower)}, {points(last.upper)}]")
    if state.pool_delta is not None:
        parts.append(f"whole pool Δ {points(state.pool_delta)}")
    if state.live and state.spent.get("runs"):
        parts.append(f"{state.spent['runs']} runs, {state.spent['seconds']:.0f} s, "
                     f"{state.spent['tokens']:,} tokens")
    if last is not None and last.harness_sensitive:
        parts.append("reversed by " + ", ".join(last.harness_sensitive) + " (exploratory)")
    if parts:
        text.append(" · ".join(parts) + "\n")
    text.append("live comparison · " if state.live else "replay of the grid's cells · ",
                style="bold cyan")
    text.append(settings_line(state), style="dim")
    return text
