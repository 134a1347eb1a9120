"""Pane 3: adjacent pairs and their gap split; Enter → the items behind the stable and
fragile parts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from rich.text import Text
from textual import on
from textual.widgets import DataTable, Static

from fragility_tui.text import distinct_labels
from fragility_tui.tui.formats import num, share_cell, share_words
from fragility_tui.tui.messages import ShowPair
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.panes.calibration import (CALIBRATING, CalibrationReady,
                                                 failed_line, start_calibration,
                                                 line_width, verdict_line)
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import Column, ReportTable

if TYPE_CHECKING:
    from fragility_tui.analysis.decisions import Decision

# The verdict and both decisions first, whole at 80 columns (issue 44; issue 60 saw them cut
# to `unde` / `harn`): the names narrow to leave them room (PairsPane.name_width); on screen
# the decision heads are the targets' names (the border title says so), copied and exported
# in full.
NAME_WIDTH, MIN_NAME_WIDTH = 22, 12
LEAD = 5  # A, B, verdict and the two decisions: what must fit the table's width
COLUMNS = [Column("A", "name", NAME_WIDTH), Column("B", "name", NAME_WIDTH), Column("verdict"),
           Column("decision (observed)", short="observed"),
           Column("decision (balanced)", short="balanced"), Column("support"),
           Column("gap Δ", "int"), Column("fragile share %", "rich"), Column("|S|", "int"),
           Column("A only", "int"), Column("B only", "int"), Column("stable gap", "int"),
           Column("incomplete gap", "int"), Column("fragile gap", "int"),
           Column("manufactured"), Column("reversals", "int")]

VERDICT_STYLE = {"identical": "yellow", "one item": "yellow", "cancel": "magenta",
                 "differs": "default"}
SUPPORT_STYLE = {"supported": "green", "reversed": "bold red", "manufactured": "yellow"}


def decision_label(decisions: Sequence[Decision], a: str, b: str, target: str,
                   reference: str) -> Text | None:
    """The pair's decision at the reference config in use (o0.letter, or the grid's stand-in)."""
    for d in decisions:
        if {d.a, d.b} == {a, b} and d.target == target and d.config == reference:
            return Text(d.label, style="green" if d.label == "stable" else "yellow")
    return None


class PairsPane(Pane, pane_id="pairs", title="Pairs", above="pairs-summary",
                below="pairs-calibration"):
    help = "Adjacent pairs of the reference ranking (A above B). Enter: items behind the gap."

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._calibrated: dict = {}  # (a, b) -> tallies, for the view shown

    def compose_body(self):
        yield from super().compose_body()
        yield Static("", id="pairs-detail", markup=False)

    def render_view(self, view) -> None:
        report = view.report
        decisions, reference = report.decisions, report.grid.reference
        rows = []
        for p in report.pairs:
            verdict = Text(p.verdict, style=VERDICT_STYLE.get(p.verdict, ""))
            manufactured = Text("MANUFACTURED", style="bold red") if p.manufactured else Text("no")
            support = Text(p.support or "-", style=SUPPORT_STYLE.get(p.support or "", ""))
            rows.append((f"{p.a}\x1f{p.b}",
                         [p.a, p.b, verdict,
                          decision_label(decisions, p.a, p.b, "observed", reference),
                          decision_label(decisions, p.a, p.b, "balanced", reference), support,
                          p.gap, share_cell(p.fragile_share), p.stable_items, p.a_only_stable,
                          p.b_only_stable, p.stable_gap, p.incomplete_gap, p.fragile_gap,
                          manufactured, p.reversals]))
        table = self.query_one(ReportTable)
        width = self.name_width(rows)
        self._rows, self._shown_width = rows, width
        table.set_data([Column(c.label, c.kind, width) if c.kind == "name" else c
                        for c in COLUMNS], rows)
        # which reference the gaps and decisions use (the verdicts read the stable set,
        # robust over every config in view), so a Compare at another config is not misread
        table.border_title = f"Adjacent pairs · gap and decisions at {reference}, by target"
        self.update_caption()
        s, rk = report.pairs_summary, report.rankings
        summary = Text()
        summary.append(f"{s.manufactured} of {s.nonzero_gaps} nonzero gaps manufactured",
                       style="bold")
        if s.reversed:
            summary.append(f" · {s.reversed} reversed (stable set against the gap)",
                           style="bold red")
        summary.append(f" · {s.supported} supported · fragile share mean "
                       f"{share_words(s.mean_fragile_share)} · pooled "
                       f"{share_words(s.pooled_fragile_share)}")
        summary.append(f" · {rk.champion_count} champions over configs · mean "
                       f"Kendall τ {num(rk.mean_kendall_tau)}")
        self.query_one("#pairs-summary", Static).update(summary)
        self._calibrated = {}
        self.call_after_refresh(self._calibrate_current)

    def name_width(self, rows) -> int:
        """The width A and B are cut to: as wide as leaves the verdict and both decisions
        whole in the table (NAME_WIDTH at most, MIN_NAME_WIDTH at least), and never so
        narrow that two different names look alike."""
        names = sorted({clean(v, one_line=True, limit=200) for _, r in rows for v in r[:2]})
        if not names:
            return NAME_WIDTH
        room = (self.size.width or 120) - 4  # the border, and a scrollbar's room
        lead = sum(max([len(COLUMNS[k].short or COLUMNS[k].label)] +
                       [len(r[k].plain if isinstance(r[k], Text) else str(r[k] or ""))
                        for _, r in rows]) + 2 for k in range(2, LEAD))
        width = max(MIN_NAME_WIDTH, min(NAME_WIDTH, (room - lead) // 2 - 2))
        return max(len(n) for n in distinct_labels(names, width))

    def on_resize(self) -> None:
        """Wider or narrower: the names take the room the lead columns leave them."""
        rows = getattr(self, "_rows", None)
        if self.view is not None and not self.stale and rows and \
                self.name_width(rows) != self._shown_width:
            self.render_view(self.view)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._calibrate_current()

    def _current_pair(self) -> tuple[str, str] | None:
        key = self.query_one(ReportTable).current_key()
        return None if key is None else tuple(key.split("\x1f"))

    def _calibrate_current(self) -> None:
        line = self.query_one("#pairs-calibration", Static)
        pair, view = self._current_pair(), self.view
        self._show_detail(pair, view)
        if pair is None or view is None:
            line.update("")
            return
        done = self._calibrated.get(pair)
        if done is not None:
            line.update(verdict_line(done, line_width(line)))
            return
        line.update(Text(CALIBRATING, style="italic"))
        start_calibration(self, view, *pair)

    def _show_detail(self, pair, view) -> None:
        """The highlighted pair's split in words: why a verdict cannot say more (too few
        stable disagreements for the exact test), and the part of Δ on incomplete rows."""
        found = [p for p in (view.report.pairs if view is not None else ())
                 if pair is not None and (p.a, p.b) == pair]
        if not found:
            self.query_one("#pairs-detail", Static).update("")
            return
        p = found[0]
        n = p.a_only_stable + p.b_only_stable
        # the pair is the row under the cursor (as for the calibration line): no names;
        # what does not fit 80 columns wraps (it was cut at `+2 of the gap on`)
        text = Text("stable set: ")
        text.append(p.detail or f"{n} stable disagreements, exact test p {num(p.mcnemar_p, 3)}",
                    style="yellow" if p.detail else "")
        if p.fragile_share is not None and not 0 <= p.fragile_share <= 1:
            text.append(f" · fragile share {share_words(p.fragile_share)}",
                        style="bold red" if p.reversed else "")
        if p.incomplete_gap:
            text.append(f" · {p.incomplete_gap:+d} of the gap on items with a missing cell")
        self.query_one("#pairs-detail", Static).update(text)

    @on(CalibrationReady)
    def _calibration_ready(self, message: CalibrationReady) -> None:
        message.stop()
        if message.view is not self.view or self._current_pair() != (message.a, message.b):
            if message.result is not None and message.view is self.view:
                self._calibrated[(message.a, message.b)] = message.result
            return  # computed for a view since replaced, or the cursor moved on
        line = self.query_one("#pairs-calibration", Static)
        if message.result is None:
            line.update(failed_line(message.error or "unknown error"))
            return
        self._calibrated[(message.a, message.b)] = message.result
        line.update(verdict_line(message.result, line_width(line)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        a, b = event.row_key.value.split("\x1f")
        self.post_message(ShowPair(a, b))
