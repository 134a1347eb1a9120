"""Pane 8: any two models → decision label with every flag, both targets, robust-set McNemar,
per-benchmark breakdown and cost."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Select, Static

from fragility_tui.tui.formats import decision_reason, num, pct
from fragility_tui.tui.live import pair_coverage
from fragility_tui.tui.messages import CompareQueued, WorkFailed
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.panes.compare_sequence import PROCESS_POLL_SECONDS, SequenceMixin
from fragility_tui.tui.panes.calibration import (CALIBRATING, CalibrationReady,
                                                 failed_line, start_calibration,
                                                 label_line, line_width)
from fragility_tui.tui.plot_toggle import PlotToggle
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import Column, FormKeys, ReportTable

COLUMNS = [Column("benchmark"), Column("paired items", "int"),
           Column("Δ̂ points", "pts"), Column("CI low", "pts"), Column("CI high", "pts")]


@dataclass
class CompareResult(Message):
    a: str
    b: str
    decisions: list
    cost: dict
    deltas: list = field(default_factory=list)  # analysis.config_deltas.ConfigDelta
    configs: list = field(default_factory=list)
    provisional: str = ""  # "provisional: 120 of 265 items" while items are still to come
    at_reference: object = None  # analysis.pair_detail.ConfigPair: accuracies, discordant items
    view: object = None  # the view it was computed on: an answer to an older view is dropped


def decisions_for(view, a: str, b: str) -> list[dict]:
    """Both targets' decisions for A vs B at the reference config (SPEC §9), as JSON dicts."""
    from fragility_tui.analysis.decisions import decide_pairs

    return [d.to_json() for d in decide_pairs(view.cube, [(a, b)], seed=view.seed)]


def breakdown(decisions: list[dict]) -> list[tuple[str, list]]:
    """Per-benchmark Δ̂ and interval (within one benchmark both targets weigh items alike,
    so the first decision's breakdown stands for both)."""
    rows = []
    for pb in (decisions[0].get("per_benchmark", []) if decisions else []):
        ci = pb.get("ci") or [None, None]
        rows.append((pb["benchmark"], [pb["benchmark"], pb["n_items"], _points(pb["delta"]),
                                       _points(ci[0]), _points(ci[1])]))
    return rows


def _points(x):
    return None if x is None else 100 * x


NO_RUN = "no run recorded"


def cost_text(costs: dict[str, dict], model: str) -> str:
    """Seconds and tokens per item from the model's cells (Store.model_costs, the same
    figures as `report`), shown beside accuracy, never folded into it."""
    cost = costs.get(model) or {}
    seconds, tokens = cost.get("seconds_per_item"), cost.get("tokens_per_item")
    if seconds is None or tokens is None:
        return f"{NO_RUN} (imported or synthetic cells)"
    return f"{seconds:.2f} s/item · {tokens:,.0f} tokens/item"


class Pickers(FormKeys, Horizontal):
    """The two model pickers: Esc leaves them for the table (tui/widgets.FormKeys); every
    other key works as anywhere in the pane (s: the selection, g, n, v, a pane's digit: a
    closed dropdown takes no letter, an open one its own)."""

    keeps_letters = False


class ComparePane(SequenceMixin, PlotToggle, Pane, pane_id="compare", title="Compare"):
    help = ("Pick two models: decision under both targets, robust-set test, Δ̂ per config "
            "(g: plot or table), benchmarks, cost. n: run two. v: stop when settled.")
    BINDINGS = [Binding("g", "toggle_plot", "Plot/table", tooltip="Show the plot or the table",
                        id="compare.plot"),
                Binding("n", "new_comparison", "Compare form",
                        tooltip="Run two models (or a model and its int8/int4 build) and "
                                "compare them as their cells come in", id="compare.new"),
                Binding("v", "sequence", "Sequence",
                        tooltip="The sequential comparison of the pair (stop when settled): "
                                "Δ̂ and its confidence sequence against items done, the "
                                "verdict; again: back to the full grid's decision",
                        id="compare.sequence")]
    # (grid, A, B) a Compare form queued, until the grid is open with cells of both
    wanted: tuple[str, str, str] | None = None
    started: tuple = ()  # (process, log, what) of the processes started for `wanted`
    not_started: tuple = ()  # why the others could not start
    _started_ended: tuple = ()  # which of them had ended at the last look
    _started_timer = None
    plot_id, table_id = "compare-plot", "compare-table"
    small_hides = ("compare-result", "compare-calibration")

    def compose_body(self) -> ComposeResult:
        from fragility_tui.tui.plots import new_plot  # textual-plot: after the first frame

        with Pickers(id="compare-pickers"):
            yield Select([], prompt="model A", id="compare-a", allow_blank=True)
            yield Select([], prompt="model B", id="compare-b", allow_blank=True)
        yield Static("", id="compare-result")
        yield Static("", id="compare-calibration")
        yield new_plot("compare-plot")
        yield ReportTable(table_name="compare", id="compare-table")

    def focus_on_open(self) -> None:
        """The first picker, so Enter opens it at once (the table had the focus, and Enter
        did nothing until Tab); the table when the pickers are hidden (no pair to pick)."""
        picker = self.query_one("#compare-a", Select)
        if picker.display and self.query_one("#compare-pickers").display:
            picker.focus()
        else:
            self.focus_main()

    def render_view(self, view) -> None:
        ranked = [row.band.model for row in view.report.bands]
        models = ranked + [m for m in view.cube.models if m not in ranked]
        if self.wanted and (view.grid != self.wanted[0]
                            or not set(self.wanted[1:]) <= set(models)):
            self._show_waiting(view, models)
            return
        if self.wanted:  # both have cells now: picked once, the user's picks rule after
            _, old_a, old_b = self.wanted
            self.wanted, self.started, self.not_started = None, (), ()
            self._set_options(models, old_a, old_b)
            self.call_after_refresh(self.compare)
            return
        sel_a, sel_b = self.query_one("#compare-a", Select), self.query_one("#compare-b", Select)
        self._set_options(models, sel_a.value, sel_b.value)
        self.call_after_refresh(self.compare)  # the pane paints first, the worker starts after

    def _set_options(self, models: list[str], old_a, old_b) -> None:
        options = [(clean(m, one_line=True, limit=80), m) for m in models]
        sel_a, sel_b = self.query_one("#compare-a", Select), self.query_one("#compare-b", Select)
        with self.prevent(Select.Changed):
            sel_a.set_options(options)
            sel_b.set_options(options)
            if len(models) >= 2:
                sel_a.value = old_a if old_a in models else models[0]
                sel_b.value = old_b if old_b in models else models[1]

    def want(self, grid: str, a: str, b: str, started=(), not_started=()) -> None:
        """Open on A vs B as soon as `grid` is open with cells of both (a Compare form's
        runs: the second may still be queued behind the first). started: (process, log,
        what) of the processes that bring the cells: watched, so that one ending failed or
        refused stops the wait instead of leaving it to wait forever; not_started: why the
        others could not start (the wait is over at once)."""
        self.wanted, self.started = (grid, a, b), tuple(started)
        self.not_started = tuple(not_started)
        self._started_ended = (False,) * len(self.started)
        if self.started and self._started_timer is None:
            self._started_timer = self.set_interval(PROCESS_POLL_SECONDS, self._poll_started)
        self._changed()

    def _poll_started(self) -> None:
        """Shown again when one of the started processes has ended: the wait may be over."""
        ended = tuple(proc.poll() is not None for proc, _, _ in self.started)
        if self.wanted and ended != self._started_ended:
            self._started_ended = ended
            self._changed()

    def _show_waiting(self, view, models: list[str]) -> None:
        grid, a, b = self.wanted
        missing = [m for m in (a, b) if m not in models or view.grid != grid]
        settling = self.following is not None and \
            (self.following.grid, self.following.a, self.following.b) == self.wanted
        why = self.not_started[0] if self.not_started else stop_reason(self.started)
        self.query_one("#compare-result", Static).update(
            stopped_text(why, settling) if why else waiting_text(grid, missing, settling))
        self.query_one("#compare-calibration", Static).update("")
        self.clear_figures(settling)

    def clear_figures(self, settling: bool) -> None:
        """No figure of the pair shown before while a new one is awaited: an empty plot and
        table, with the sequence's columns when a sequence is coming."""
        from fragility_tui.tui.panes.compare_sequence import (PLOT_TITLE, SEQUENCE_COLUMNS,
                                                              SEQUENCE_TITLE)
        from fragility_tui.tui.plots import clear_plot, draw_sequence

        plot, table = self.query_one("#compare-plot"), self.query_one(ReportTable)
        if settling:
            margin = self.following.settings.margin if self.following else 2.0
            draw_sequence(plot, [], margin / 100, 0, None)
            plot.border_title = PLOT_TITLE
            table.set_data(SEQUENCE_COLUMNS, [])
            table.border_title = SEQUENCE_TITLE
        else:
            clear_plot(plot)
            table.set_data(COLUMNS, [])
            table.border_title = ""
        self.update_caption()

    def action_new_comparison(self) -> None:
        from fragility_tui.tui.panes.compare_form import CompareFormScreen
        from fragility_tui.tui.panes.run_form import open_grid_configs, proposed_grid

        synthetic = frozenset(g.name for g in self.grids or [] if g.synthetic)
        grid = proposed_grid(self.grid_name, synthetic, open_grid_configs(self.view,
                                                                          self.grid_name))

        def done(plan) -> None:
            if plan is not None:
                self.post_message(CompareQueued(plan))

        # from the sequence view, the form opens with "stop when settled" ticked
        self.app.push_screen(CompareFormScreen(grid, self.db_path, synthetic,
                                               settled=self.sequence_on), done)

    def set_pair(self, a: str, b: str) -> None:
        with self.prevent(Select.Changed):
            self.query_one("#compare-a", Select).value = a
            self.query_one("#compare-b", Select).value = b
        self.compare()

    @on(Select.Changed)
    def _picked(self, event: Select.Changed) -> None:
        event.stop()
        self.compare()

    def compare(self) -> None:
        view = self.view
        a, b = self.query_one("#compare-a", Select).value, self.query_one("#compare-b", Select).value
        if view is None:
            return
        line = self.query_one("#compare-calibration", Static)
        if not isinstance(a, str) or not isinstance(b, str) or a == b:
            # A blank or repeated choice (a grid of one model) clears the last result, its
            # plot and table with it: they no longer answer it.
            self.query_one("#compare-result", Static).update(Text("pick two different models"))
            line.update("")
            self.clear_figures(False)
            return
        if self.sequence_on:
            self.start_sequence(view, a, b)
            return
        self.query_one("#compare-result", Static).update(Text("computing…", style="italic"))
        line.update(Text(CALIBRATING, style="italic"))
        self._compare(view, a, b)
        start_calibration(self, view, a, b)

    def _picked_pair(self) -> tuple:
        return (self.query_one("#compare-a", Select).value,
                self.query_one("#compare-b", Select).value)

    @on(CalibrationReady)
    def _calibration_ready(self, message: CalibrationReady) -> None:
        message.stop()
        if message.view is self.view and self._picked_pair() == (message.a, message.b) \
                and not self.sequence_on:
            line = self.query_one("#compare-calibration", Static)
            line.update(label_line(message.result, line_width(line)) if message.result
                        else failed_line(message.error or "unknown error"))

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def _compare(self, view, a: str, b: str) -> None:
        try:
            decisions = decisions_for(view, a, b)
            costs = self.gateway.model_costs(view.grid)
            cost = {a: cost_text(costs, a), b: cost_text(costs, b)}
            from fragility_tui.analysis.config_deltas import config_deltas

            deltas = config_deltas(view.cube, a, b, seed=view.seed)
            partial = pair_coverage(view.cube, a, b)
            from fragility_tui.analysis.pair_detail import pair_detail

            ref = decisions[0]["config"] if decisions else view.cube.reference
            result = CompareResult(a, b, decisions, cost, deltas, [d.config for d in deltas],
                                   partial.label() if partial else "",
                                   pair_detail(view.cube, a, b, [ref]).configs[0], view)
        except Exception as exc:
            self.post_message(WorkFailed(f"comparing {a} and {b}", f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(result)

    @on(CompareResult)
    def _show(self, result: CompareResult) -> None:
        if self.sequence_on or result.view is not self.view or \
                self._picked_pair() != (result.a, result.b):
            return  # the sequence was asked for since, or another grid or pair
        self.query_one("#compare-result", Static).update(summary_text(result))
        from fragility_tui.tui.plots import draw_pair_deltas

        plot = self.query_one("#compare-plot")
        draw_pair_deltas(plot, result.configs, result.deltas)
        plot.border_title = "● Δ̂ (A − B) per config  │ 95% interval"
        table = self.query_one(ReportTable)
        table.set_data(COLUMNS, breakdown(result.decisions))
        at = result.decisions[0].get("config", "the reference") if result.decisions else \
            "the reference"
        table.border_title = f"Per benchmark Δ̂ (A − B) at {at}, paired items, both targets"
        self.update_caption()
        self.apply_plot_layout()


def waiting_text(grid: str, missing: list[str], settling: bool) -> Text:
    """While a Compare form's processes have not yet brought cells of both models."""
    text = Text("Stop when settled: waiting for the first chunk's cells of " if settling
                else "Compare in one go: waiting for the first cells of ", style="bold yellow")
    text.append(" and ".join(clean(m, one_line=True, limit=80) for m in missing))
    text.append(f" in grid {clean(grid, one_line=True, limit=80)}; a queued run starts "
                "when its device frees. The Runs pane (7) shows " +
                ("each chunk's runs." if settling else "both runs."), style="yellow")
    return text


def stop_reason(started) -> str | None:
    """Why a Compare form's processes will not bring the pair's cells: the first of them
    that ended failed, refused (exit 2: e.g. the grid holds another item set) or cancelled,
    with its log's last line; None while none has."""
    from fragility_tui.processes import failure_line

    for proc, log, what in started:
        code = proc.poll()
        if code is not None and code != 0:
            how = "cancelled" if code == 130 else f"failed (exit {code})"
            return f"{what} {how}: {failure_line(log)}"
    return None


def stopped_text(why: str, settling: bool) -> Text:
    """The waiting line once the wait is over: what stopped it, and what is left to do."""
    text = Text("Stop when settled stopped: " if settling else "Compare in one go stopped: ",
                style="bold red")
    text.append(clean(why, one_line=True, limit=400))
    text.append(". The Runs pane (7) has its log; n opens the form again.", style="yellow")
    return text


def summary_text(r: CompareResult) -> Text:
    text = Text()
    text.append("A ", style="bold")
    text.append(clean(r.a, one_line=True, limit=120))
    text.append("  vs  B ", style="bold")
    text.append(clean(r.b, one_line=True, limit=120))
    if r.provisional:
        text.append("  " + r.provisional, style="bold yellow")
    text.append("\n")
    if r.at_reference is not None:  # the tour's "33 items only the base build gets right"
        c = r.at_reference
        text.append(f"at {c.config}: ", style="bold")
        text.append(f"A {pct(c.accuracy_a)} % · B {pct(c.accuracy_b)} % · of {c.paired_items} "
                    f"paired items {c.only_a} only A gets right, {c.only_b} only B\n")
    if not r.decisions:
        text.append("no decision available for this pair\n", style="yellow")
    for d in r.decisions:
        style = "bold green" if d["label"] == "stable" else "bold yellow"
        text.append(f"{d['target']:<9} ", style="bold")
        text.append(f"{d['label']:<18}", style=style)
        if d.get("delta") is None:
            text.append(" Δ̂ undefined")
        else:
            text.append(f" Δ̂ {_pts(d['delta'])} pts")
        if d.get("ci"):
            text.append(f", 95% CI [{_pts(d['ci'][0])}, {_pts(d['ci'][1])}]")
        if d.get("simultaneous_ci"):  # an adjacent pair: its family's simultaneous interval
            lo, hi = d["simultaneous_ci"]
            text.append(f", over all adjacent pairs [{_pts(lo)}, {_pts(hi)}]")
        text.append(f" at {d.get('config', 'o0.letter')}")
        flags = ", ".join(d.get("flags", [])) or "none"
        text.append(f" · flags: {flags}")
        text.append("\n")
        if d.get("unsupported_benchmarks"):
            text.append(f"          unsupported by: {', '.join(d['unsupported_benchmarks'])}\n",
                        style="dim")
        reason = decision_reason(d)
        if reason:
            text.append(f"          why: {reason}\n", style="dim")
    if r.decisions:
        m = r.decisions[0]["mcnemar"]
        text.append("robust set: ", style="bold")
        text.append(f"{m['a_only']} items only A robust-correct, {m['b_only']} only B; exact "
                    f"McNemar p = {num(m['p'], 3)}\n")
    # a grid of imported or simulated cells has no cost: no line for it (room at 80 x 24)
    if any(not str(r.cost.get(m, "")).startswith(NO_RUN) for m in (r.a, r.b)):
        text.append("cost: ", style="bold")
        text.append(f"A {r.cost.get(r.a)} · B {r.cost.get(r.b)}")
    text.rstrip()  # in place: no blank line after the last one
    return text


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"
