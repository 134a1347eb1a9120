"""Items → one item: its models × configs matrix and any cell's details."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from fragility_tui.tui.sanitize import clean


from fragility_tui.tui.screens.base import DrillScreen
from fragility_tui.tui.cell_explain import bit_mark, cell_detail, fmt_number, item_text


# ---------------------------------------------------------------- Items → item
CONFIG_SHORT = {"letter": "L", "paren": "P", "digit": "D", "instruct": "I"}


def short_config(config_id: str) -> str:
    """Column label of the bit matrix: o3.paren → 3P, cloze_qa → qa, cloze_bare → cb."""
    if "." in config_id:
        order, fmt = config_id.split(".")
        return order[1:] + CONFIG_SHORT.get(fmt, fmt[:1].upper())
    return {"cloze_qa": "qa", "cloze_bare": "cb"}.get(config_id, config_id[:2])


@dataclass
class CellsLoaded(Message):
    cells: dict  # (model, config_id) -> cell dict


class ItemScreen(DrillScreen):
    """One item: the models × configs bit matrix and, for the cell under the cursor, the
    exact prompt, the permutation, the raw output, the parse and the option scores."""

    def __init__(self, view, gateway, item_uid: str):
        super().__init__()
        self.view, self.gateway, self.item_uid = view, gateway, item_uid
        self.cells: dict = {}

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Horizontal(id="item-body"):
            with Vertical(id="item-left"):
                yield DataTable(id="bit-matrix", cursor_type="cell", zebra_stripes=False,
                                cell_padding=0)
                yield Static("", id="matrix-legend")
            with VerticalScroll(id="item-right"):
                yield Static("", id="item-text", markup=False)
                yield Static("", id="cell-detail", markup=False)
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        view = self.view
        self.item = view.items.get(self.item_uid)
        k = view.cube.items.index(self.item_uid)
        self.set_title(f"item {self.item_uid} · {view.cube.benchmarks[k]} · fragility "
                       f"{fmt_number(view.fragility[k])} · discrimination {fmt_number(view.discrimination[k])}")
        self.query_one("#item-text", Static).update(item_text(self.item))
        self._fill_matrix(view, k)
        self.query_one("#matrix-legend", Static).update(Text(
            "✓ correct  ✗ wrong  · missing   columns: 0L = o0.letter, 3P = o3.paren, "
            "D digit, I instruct, qa/cb = cloze_qa/cloze_bare", style="dim"))
        self.load_cells()
        self.query_one("#bit-matrix", DataTable).focus()

    def _fill_matrix(self, view, k: int) -> None:
        table = self.query_one("#bit-matrix", DataTable)
        table.add_column(Text("model"), key="model")
        for c in view.cube.configs:
            table.add_column(Text(short_config(c).rjust(3)), key=c, width=3)
        for m, model in enumerate(view.cube.models):
            marks = [bit_mark(bool(view.cube.bits[m, k, c]), bool(view.cube.present[m, k, c]))
                     for c in range(len(view.cube.configs))]
            table.add_row(Text(clean(model, one_line=True, limit=200)[:28] + " "), *marks,
                          key=model)
        if len(view.cube.configs):
            table.move_cursor(row=0, column=1, animate=False)

    @work(thread=True, exclusive=True, group="item-cells", exit_on_error=False)
    def load_cells(self) -> None:
        try:
            rows = self.gateway.item_cells(self.view.grid, self.item_uid)
        except Exception as exc:  # the matrix stays useful without the cell details
            rows = []
            self.app.call_from_thread(self.app.notify, clean(exc, limit=300),
                                      title="could not load cells", severity="error",
                                      markup=False)
        self.post_message(CellsLoaded({(r["model"], r["config_id"]): r for r in rows}))

    @on(CellsLoaded)
    def _cells_loaded(self, message: CellsLoaded) -> None:
        self.cells = message.cells
        self._show_cell()

    @on(DataTable.CellHighlighted, "#bit-matrix")
    def _highlighted(self, event: DataTable.CellHighlighted) -> None:
        self._show_cell()

    def _show_cell(self) -> None:
        table = self.query_one("#bit-matrix", DataTable)
        if not table.row_count:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate)
        model, config_id = key.row_key.value, key.column_key.value
        detail = self.query_one("#cell-detail", Static)
        if config_id == "model":
            detail.update(Text("move right onto a config column to see that cell", style="dim"))
            return
        detail.update(cell_detail(self.item, model, config_id, self.cells.get((model, config_id)),
                                  self.view.seed))
