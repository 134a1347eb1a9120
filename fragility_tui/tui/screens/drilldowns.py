"""Bands → a model's configs; Pairs → the items behind a gap split."""

from __future__ import annotations


from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from fragility_tui.tui.config_matrix import compact_rows, config_letters, group_header, matrix_layout
from fragility_tui.tui.item_table import ITEM_COLUMNS, item_rows
from fragility_tui.tui.formats import verdict_reason
from fragility_tui.tui.messages import ShowItem
from fragility_tui.tui.plot_toggle import PlotToggle
from fragility_tui.tui.screens.base import DrillScreen
from fragility_tui.tui.view_model import pair_item_groups
from fragility_tui.tui.virtual_table import VirtualTable
from fragility_tui.tui.widgets import Column, ReportTable, hbar, safe_title


# ---------------------------------------------------------------- Bands → model
ITEM_WIDTH = 22  # with the class, the tally and 26 configs, the item table fits 80 columns
SHORT_CLASS = ("robust ✓", "robust ✗", "fragile", "incomplete")  # analysis.classify order


# How a config scores (its `scoring` axis, SPEC §2b), as the drill-down names it
SCORING_NAMES = {"generate": "generated", "likelihood": "likelihood",
                 "letter_lik": "letter likelihood"}


def scoring_means(view, model: str) -> list[tuple[str, int, float]]:
    """(scoring, configs, mean accuracy over those configs) for the model's configs in view,
    generated answers first: the README's "20–24% averaged over the 24 generation configs"
    is each model's first figure here."""
    groups: dict[str, list[float]] = {}
    for e in view.report.configs:
        acc = e.accuracy.get(model)
        if acc is not None and acc == acc:  # no cell yet: NaN or missing
            scoring = view.cube.axes(e.config).get("scoring") or "unknown"
            groups.setdefault(SCORING_NAMES.get(scoring, scoring), []).append(acc)
    order = list(SCORING_NAMES.values())
    names = sorted(groups, key=lambda g: (order.index(g) if g in order else len(order), g))
    return [(g, len(groups[g]), sum(groups[g]) / len(groups[g])) for g in names]


def scoring_line(view, model: str) -> Text:
    """`mean %: generated 20.4 (24 configs) · likelihood 42.1 (2 configs) · all 22.1`."""
    means = scoring_means(view, model)
    text = Text("mean %: ", style="bold")
    for k, (name, n, mean) in enumerate(means):
        if k:
            text.append(" · ")
        text.append(f"{name} {100 * mean:.1f} ({n} config{'s' if n != 1 else ''})")
    if len(means) > 1:
        n = sum(n for _, n, _ in means)
        text.append(f" · all {100 * sum(n * m for _, n, m in means) / n:.1f}")
    return text


def keep_end(text: str, width: int) -> Text:
    """Cut from the front: an item id's end (its number) tells items apart."""
    return Text(text if len(text) <= width else "…" + text[-(width - 1):])

class ModelScreen(PlotToggle, DrillScreen):
    """A model's accuracy under every config in view, and its answers to every item in one
    compact row of the configs (Bands → Enter; Enter on an item: the item drill-down)."""

    def __init__(self, view, model: str):
        super().__init__()
        self.view, self.model = view, model

    BINDINGS = [Binding("g", "toggle_plot", "Plot/items", tooltip="Show the plot or the items",
                        id="model.plot")]
    plot_id, table_id = "model-plot", "model-items"

    def compose(self) -> ComposeResult:
        from fragility_tui.tui.plots import new_plot  # textual-plot: after the first frame

        yield from self.compose_header()
        yield Static("", id="model-scoring")
        yield ReportTable(table_name="model-configs", id="model-table")
        yield new_plot("model-plot")
        yield VirtualTable(table_name="model-items", id="model-items")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        view = self.view
        self.set_title(f"{self.model}: accuracy under each config in view "
                       f"(grid {view.grid})")
        ref = next((e.accuracy.get(self.model) for e in view.report.configs
                    if e.config == view.cube.reference), None)
        rows = []
        for e in view.report.configs:
            acc = e.accuracy.get(self.model)
            delta = None if acc is None or ref is None else 100 * (acc - ref)
            rows.append((e.config, [e.config, acc, delta, self.model in e.champions,
                                    hbar(acc, 30, style="green")]))
        table = self.query_one(ReportTable)
        table.set_data([Column("config"), Column("accuracy %", "pct"),
                        Column("Δ vs reference (points)", "pts"), Column("champion", "bool"),
                        Column("", "rich")], rows)
        table.border_title = safe_title(f"{self.model} × {len(rows)} configs")
        table.border_subtitle = Text(table.caption_text)
        self.query_one("#model-scoring", Static).update(scoring_line(view, self.model))
        table.focus()
        self._plot()
        self._fill_items()
        self.apply_plot_layout()

    def _plot(self) -> None:
        """Every model in view over the configs in view, this one marked (this)."""
        view = self.view
        accuracy = {m: [e.accuracy.get(m) for e in view.report.configs]
                    for m in [row.band.model for row in view.report.bands]}
        from fragility_tui.tui.plots import draw_config_accuracy

        plot = self.query_one("#model-plot")
        draw_config_accuracy(plot, [e.config for e in view.report.configs], accuracy,
                             highlight=self.model)
        plot.border_title = "accuracy per config, every model in view"

    def _fill_items(self) -> None:
        view = self.view
        m = list(view.cube.models).index(self.model)
        columns = matrix_layout(list(view.cube.configs))
        position = {c: j for j, c in enumerate(view.cube.configs)}
        bits, present = view.cube.bits[m], view.cube.present[m]
        correct = (bits & present).sum(axis=1).tolist()
        shown = present.sum(axis=1).tolist()
        classes = view.classes[m].tolist()
        marks = compact_rows(bits, present, columns, position)
        # the item's class and tally before its marks: a grid of more configs than the
        # synthetic 26 (starter-real's 48) scrolls the marks sideways, not the class (`fragil`)
        rows = [(uid, [keep_end(uid, ITEM_WIDTH), SHORT_CLASS[classes[k]],
                       f"{correct[k]}/{shown[k]}", marks[k]])
                for k, uid in enumerate(view.cube.items)]
        groups = group_header(columns, 0).plain.rstrip()
        table = self.query_one("#model-items", VirtualTable)
        table.set_data([Column("item", width=ITEM_WIDTH), Column("class"), Column("✓/n"),
                        Column(f"{groups}\n{config_letters(columns)}", "marks",
                               width=len(columns))], rows)
        table.border_title = safe_title(
            f"{self.model} × {len(rows):,} items (✓ correct ✗ wrong · missing)")
        table.border_subtitle = Text(table.caption_text)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        event.stop()
        self.post_message(ShowItem(event.key))


# ---------------------------------------------------------------- Pairs → items
class PairScreen(DrillScreen):
    """The items behind a pair's stable and fragile parts (Pairs → Enter)."""

    def __init__(self, view, a: str, b: str):
        super().__init__()
        self.view, self.a, self.b = view, a, b

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        yield Static("", id="pair-summary")
        yield ReportTable(table_name="pair-items", id="pair-items")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        view = self.view
        self.set_title(f"A = {self.a}   B = {self.b}: the items behind the gap")
        groups = pair_item_groups(view, self.a, self.b)
        summary = Text()
        # the report is typed (analysis.report_sections.Report); verdict_reason reads JSON
        pair = next((p.to_json() for p in view.report.pairs
                     if (p.a, p.b) == (self.a, self.b)), None)
        if pair is not None:  # the verdict and why (it is about the stable set)
            summary.append(f"verdict {pair['verdict']}: ", style="bold")
            summary.append(verdict_reason(pair) + "\n")
        rows = []
        explain = {"stable: A only": "A robust-correct, B robust-wrong (supports A)",
                   "stable: B only": "B robust-correct, A robust-wrong (supports B)",
                   "fragile split": "the reference config splits them, but at least one of "
                                    "the two is fragile on the item",
                   "incomplete split": "the reference config splits them on an item one of "
                                       "them lacks a cell of (the incomplete gap, not "
                                       "fragility)"}
        for part, idx in groups.items():
            if part == "incomplete split" and not len(idx):
                continue  # said only where the grid misses cells of the pair
            summary.append(f"{len(idx):>5,}  {part}: {explain.get(part, '')}\n")
            for key, values in item_rows(view, idx):
                rows.append((key, [part] + values))
        summary.append("Enter on an item: its models × configs matrix and every cell's prompt "
                       "and output.", style="dim")
        self.query_one("#pair-summary", Static).update(summary)
        table = self.query_one(ReportTable)
        table.set_data([Column("part")] + ITEM_COLUMNS, rows)
        table.border_title = "Items by part of the gap split"
        table.border_subtitle = Text(table.caption_text)
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(ShowItem(event.row_key.value))
