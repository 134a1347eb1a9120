"""Pane 1: the grids in the store; Enter opens one."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from fragility_tui.tui.messages import GridChosen, GridsChanged
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.widgets import Column, ReportTable, safe_title

COLUMNS = [Column("grid"), Column("kind"), Column("models", "int"), Column("items", "int"),
           Column("configs", "int"), Column("cells", "int"), Column("complete"),
           Column("description", width=60)]


def kind_label(synthetic: bool) -> Text:
    return Text("SYNTHETIC", style="bold black on yellow") if synthetic else Text("real")


def complete_label(value) -> object:
    if isinstance(value, bool):
        return "complete" if value else "partial"
    if isinstance(value, float):
        return f"{100 * value:.1f}%"
    return value


class GridsPane(Pane, pane_id="grids", title="Grids"):
    help = "Grids in the store. Enter opens one; r reloads the list."
    needs_view = False
    BINDINGS = [Binding("r", "reload", "Reload", tooltip="Reload the list of grids",
                        id="grids.reload")]


    def render_view(self, view) -> None:
        table = self.query_one(ReportTable)
        rows = []
        for g in self.grids or []:
            rows.append((g.name, [g.name, kind_label(bool(g.synthetic)), g.models, g.items,
                                  g.configs, g.cells, complete_label(g.complete),
                                  getattr(g, "description", "") or ""]))
        table.set_data(COLUMNS, rows)
        open_name = self.grid_name
        table.border_title = safe_title("Grids" + (f" — open: {open_name}" if open_name else ""))
        if open_name:
            table.select_key(open_name)
        self.update_caption()
        empty = self.query_one(".pane-empty")
        if not rows and self.grids is not None:
            empty.display = True
            empty.update(Text("No grids in this store yet. Create one with "
                              "`fragility-tui simulate` (synthetic) or `fragility-tui import`, "
                              "or start a run from the Runs pane (7).", style="italic"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(GridChosen(event.row_key.value))

    def action_reload(self) -> None:
        self.post_message(GridsChanged())
