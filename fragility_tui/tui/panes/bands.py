"""Pane 2: per-model bands (reference, min, max, mean, robust); Enter → per-config accuracies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import DataTable, Static

from fragility_tui.text import distinct_labels
from fragility_tui.tui.live import coverage
from fragility_tui.tui.messages import ShowModel
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import Column, ReportTable, band_bar

if TYPE_CHECKING:
    from fragility_tui.analysis.classify import Band

# The band's figures first, the configs where it reaches them after: at 80 columns the table
# stopped at `spr` and at 100 showed robust as `0.` (issue 60).
COLUMNS = [Column("model"), Column("ref %", "pct"), Column("mean %", "pct"), Column("min %", "pct"),
           Column("max %", "pct"), Column("spread", "pct"), Column("robust %", "pct"),
           Column("min config"), Column("max config"),
           Column("fragile share of ref-correct %", "pct"), Column("incomplete", "int")]
# shown when the grid records near-tie cells: the fragile rows rounding alone can explain
NEAR_TIE_COLUMN = Column("fragile only via near-ties", "int")
LEGEND = "● reference  ◆ mean  ├─┤ min…max over configs  ▓ robust accuracy   (scale 0–100 %)"


def provisional_text(cube) -> Text:
    """One line per model with items still to come (a run writing, or stopped early):
    its figures rest on the items it has so far (a seeded random sample of its run)."""
    text = Text()
    for c in coverage(cube):
        if c.provisional:
            text.append(clean(c.model, one_line=True, limit=60), style="bold yellow")
            text.append(f" {c.label()}\n", style="yellow")
    return text


class BandsPane(Pane, pane_id="bands", title="Bands", above="bands-provisional",
                below="band-chart"):
    help = ("Accuracy band per model over the configs in view. Enter: the model's configs and "
            "items; o sorts.")
    needs_statistics = False

    def render_view(self, view) -> None:
        bands = [row.band for row in view.report.bands]
        near = {r.model: r.only_near_ties for r in view.report.near_ties or ()
                if any(n.near_tie_cells for n in view.report.near_ties)}
        rows = [(b.model, [b.model, b.reference, b.mean, b.min, b.max, b.spread,
                           b.robust_accuracy, b.min_config, b.max_config,
                           b.fragile_share_of_reference_correct, b.incomplete]
                 + ([near.get(b.model)] if near else []))
                for b in bands]
        table = self.query_one(ReportTable)
        table.set_data(COLUMNS + ([NEAR_TIE_COLUMN] if near else []), rows)
        table.border_title = "Bands (models in reference order)"
        self.update_caption()
        self.query_one("#band-chart", Static).update(self.chart(bands))
        note = provisional_text(view.cube)
        provisional = self.query_one("#bands-provisional", Static)
        provisional.update(note)
        provisional.display = bool(note.plain)  # no blank line above a complete grid's table

    def chart(self, bands: list[Band]) -> Text:
        name_width = min(24, max((len(b.model) for b in bands), default=8))
        text = Text(LEGEND + "\n", style="dim")
        # Cut in the middle, as little wider as keeps two names apart: an int8 and an int4
        # build of one model (the pair the tour compares) never look alike.
        names = distinct_labels([clean(b.model, one_line=True, limit=200) for b in bands],
                                name_width)
        name_width = max((len(n) for n in names), default=name_width)
        width = max(20, self.size.width - name_width - 4) if self.size.width else 60
        for b, name in zip(bands, names):
            text.append(name.ljust(name_width) + " ")
            text.append_text(band_bar(b.min, b.max, b.reference, b.mean, b.robust_accuracy,
                                      width))
            text.append("\n")
        return text

    def on_resize(self) -> None:
        if self.view is not None and not self.stale:
            self.query_one("#band-chart", Static).update(
                self.chart([row.band for row in self.view.report.bands]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(ShowModel(event.row_key.value))
