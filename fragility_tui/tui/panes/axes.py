"""Pane 5: axis ablation (SPEC §7): preserved fraction of reference-correct answers."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from fragility_tui.text import distinct_labels
from fragility_tui.tui.formats import num
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import Column, ReportTable, hbar

MEAN_KEY = "\x1fmean"


class AxesPane(Pane, pane_id="axes", title="Axes", below="axes-chart"):
    help = ("Reference-correct answers still correct across each axis' neighbourhood: the "
            "reference and the configs differing from it on that axis alone.")

    def render_view(self, view) -> None:
        per_model, mean = view.report.axes.per_model, view.report.axes.mean
        axes = list(mean)  # order, format, scoring, all, then every other axis the grid varies
        rows = [(m, [m] + [per_model[m].get(a) for a in axes]) for m in per_model]
        rows.append((MEAN_KEY, [Text("mean over models", style="bold")] +
                     [mean.get(a) for a in axes]))
        table = self.query_one(ReportTable)
        table.set_data([Column("model")] + [Column(a, "num") for a in axes], rows)
        table.border_title = "Axis ablation"
        self.update_caption()
        self.query_one("#axes-chart", Static).update(self.chart(per_model, mean))

    @staticmethod
    def chart(per_model: dict, mean: dict) -> Text:
        text = Text("mean over models (█ preserved fraction, — an axis left with only the "
                    "reference)\n", style="dim")
        for a in mean:
            text.append(f"{a:<8} ")
            text.append_text(hbar(mean.get(a), 40))
            text.append(f" {num(mean.get(a))}\n")
        text.append("\nall axes, per model\n", style="dim")
        width = min(24, max((len(m) for m in per_model), default=8))
        names = distinct_labels([clean(m, one_line=True, limit=200) for m in per_model], width)
        width = max((len(n) for n in names), default=width)  # wider only to keep names apart
        for name, values in zip(names, per_model.values()):
            text.append(name.ljust(width) + " ")
            text.append_text(hbar(values.get("all"), 40, style="magenta"))
            text.append(f" {num(values.get('all'))}\n")
        return text
