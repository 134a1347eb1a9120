"""Bands → a model's configs; Pairs → the items behind a gap split."""

from __future__ import annotations


from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from fragility_tui.grid.configs import REFERENCE
from fragility_tui.tui.view_model import pair_item_groups
from fragility_tui.tui.item_table import ITEM_COLUMNS, item_rows
from fragility_tui.tui.widgets import Column, ReportTable, hbar, safe_title


from fragility_tui.tui.messages import ShowItem
from fragility_tui.tui.screens.base import DrillScreen


# ---------------------------------------------------------------- Bands → model
class ModelScreen(DrillScreen):
    """A model's accuracy under every config in view (Bands → Enter)."""

    def __init__(self, view, model: str):
        super().__init__()
        self.view, self.model = view, model

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        yield ReportTable(table_name="model-configs", id="model-table")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        view = self.view
        self.set_title(f"{self.model}: accuracy under each config in view "
                       f"(grid {view.grid})")
        ref = next((e["accuracy"].get(self.model) for e in view.report.get("configs", [])
                    if e["config"] == REFERENCE), None)
        rows = []
        for e in view.report.get("configs", []):
            acc = e["accuracy"].get(self.model)
            delta = None if acc is None or ref is None else 100 * (acc - ref)
            rows.append((e["config"], [e["config"], acc, delta,
                                       self.model in e.get("champions", []),
                                       hbar(acc, 30, style="green")]))
        table = self.query_one(ReportTable)
        table.set_data([Column("config"), Column("accuracy %", "pct"),
                        Column("Δ vs reference (points)", "num"), Column("champion", "bool"),
                        Column("", "rich")], rows)
        table.border_title = safe_title(f"{self.model} × {len(rows)} configs")
        table.border_subtitle = Text(table.caption_text)
        table.focus()


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
        rows = []
        explain = {"stable: A only": "A robust-correct, B robust-wrong (supports A)",
                   "stable: B only": "B robust-correct, A robust-wrong (supports B)",
                   "fragile split": "the reference config splits them, but at least one of "
                                    "the two is fragile on the item"}
        for part, idx in groups.items():
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
