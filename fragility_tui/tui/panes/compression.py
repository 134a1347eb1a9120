"""Pane 6: discrimination against fragility, and champion counts of compressed subsets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from fragility_tui.analysis.intervals import interval
from fragility_tui.tui.formats import num
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.plot_toggle import PlotToggle
from fragility_tui.tui.widgets import Column, ReportTable, hbar

if TYPE_CHECKING:
    import numpy as np

N_BINS = 10
COLUMNS = [Column("discrimination bin"), Column("items", "int"), Column("mean fragility", "num"),
           Column("", "rich")]


def binned(discrimination: np.ndarray, fragility: np.ndarray) -> list[tuple[str, list]]:
    """Items with both values defined, in equal-count bins of discrimination."""
    import numpy as np  # not before the app's first frame

    ok = ~np.isnan(discrimination) & ~np.isnan(fragility)
    d, f = discrimination[ok], fragility[ok]
    if d.size == 0:
        return []
    order = np.argsort(d, kind="stable")
    rows = []
    for k, part in enumerate(np.array_split(order, min(N_BINS, d.size))):
        if part.size == 0:
            continue
        lo, hi = d[part].min(), d[part].max()
        mean_f = float(f[part].mean())
        rows.append((str(k), [f"{lo:+.2f} … {hi:+.2f}", int(part.size), mean_f,
                              hbar(mean_f, 30)]))
    return rows


class CompressionPane(PlotToggle, Pane, pane_id="compression", title="Compression",
                      above="compression-summary"):
    help = ("Do the most discriminative items survive a harness change? Discrimination "
            "(reference config) against fragility, per item (g: plot) and in bins.")
    BINDINGS = [Binding("g", "toggle_plot", "Plot/table", tooltip="Show the plot or the table",
                        id="compression.plot")]
    plot_id, table_id = "compression-plot", "compression-table"

    def compose_body(self) -> ComposeResult:
        from fragility_tui.tui.plots import new_plot  # textual-plot: after the first frame

        yield Static("", id="compression-summary")
        yield new_plot("compression-plot")
        yield ReportTable(table_name=self.pane_id, id=f"{self.pane_id}-table")

    def render_view(self, view) -> None:
        report = view.report
        d, c = report.discrimination, report.compression
        ci = d.ci
        text = Text()
        text.append("discrimination × fragility: r = ", style="bold")
        text.append(num(d.r))
        # one way of writing an interval in every text output: [−0.29, −0.11] (issue 44)
        text.append(f" (95% CI {interval(ci[0], ci[1], 2)})" if ci else " (CI undefined)")
        text.append(f" · top-{d.top_k} discriminative items: mean fragility "
                    f"{num(d.top_k_mean_fragility)} vs {num(d.mean_fragility)} "
                    "for all items\n")
        rng = c.discriminative_range
        if not c.cuts:
            text.append(f"not compressed: k = {c.k} is not below the grid's {c.grid_items} "
                        f"items · full grid: {report.rankings.champion_count} champions over "
                        "configs", style="bold")
        else:
            text.append(f"compressed to k = {c.k} items: ", style="bold")
            text.append(f"{num(c.random_mean_champions, 1)} champions over configs (random "
                        f"subsets, mean) · {num(c.discriminative_mean_champions, 1)} "
                        "(top-k by discrimination"
                        + (f", range {rng[0]}–{rng[1]})" if rng else ")")
                        + f" · full grid: {report.rankings.champion_count}")
        self.query_one("#compression-summary", Static).update(text)
        from fragility_tui.tui.plots import draw_item_scatter

        plot = self.query_one("#compression-plot")
        drawn = draw_item_scatter(plot, view.discrimination, view.fragility)
        plot.border_title = f"fragility against discrimination: {drawn:,} items"
        table = self.query_one(ReportTable)
        table.set_data(COLUMNS, binned(view.discrimination, view.fragility))
        table.border_title = "Mean fragility by discrimination bin (equal-count bins)"
        self.update_caption()
        self.apply_plot_layout()
