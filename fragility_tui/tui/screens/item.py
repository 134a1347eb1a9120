"""Items → one item: its models × configs matrix and any cell's details."""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable, Static

from fragility_tui.tui.sanitize import clean


from fragility_tui.tui.screens.base import DrillScreen
from fragility_tui.tui.cell_explain import (bit_mark, cell_detail, fmt_number, item_text,
                                           truth_text)
from fragility_tui.tui.config_matrix import (group_header, legend, matrix_layout,
                                            model_width, short_labels)


# ---------------------------------------------------------------- Items → item
@dataclass
class CellsLoaded(Message):
    cells: dict  # (model, config_id) -> cell dict
    chats: dict  # model -> harness.chat.ChatTemplate (how its prompts were rendered)


class BitMatrix(DataTable):
    """The models × configs matrix: left and right step over the model column and the blank
    gaps between config groups, from one ✓/✗ cell to the next."""

    def cell_column(self, column: int) -> bool:
        key = self.ordered_columns[column].key.value
        return key != "model" and not key.startswith("gap-")

    def action_cursor_right(self) -> None:
        self._step(1)

    def action_cursor_left(self) -> None:
        self._step(-1)

    def _step(self, direction: int) -> None:
        row, column = self.cursor_coordinate
        target = column + direction
        while 0 <= target < len(self.columns) and not self.cell_column(target):
            target += direction
        if 0 <= target < len(self.columns):
            self.cursor_coordinate = Coordinate(row, target)


class ItemScreen(DrillScreen):
    """One item: the models × configs bit matrix and, for the cell under the cursor, the
    exact prompt, the permutation, the raw output, the parse and the option scores."""

    def __init__(self, view, gateway, item_uid: str):
        super().__init__()
        self.view, self.gateway, self.item_uid = view, gateway, item_uid
        self.cells: dict = {}
        self.chats: dict = {}

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(id="item-body"):
            yield Static("", id="matrix-groups")
            yield BitMatrix(id="bit-matrix", cursor_type="cell", zebra_stripes=False,
                            cell_padding=0)
            yield Static("", id="matrix-legend")
            with VerticalScroll(id="item-detail"):
                yield Static("", id="cell-detail", markup=False)
                yield Static("", id="item-text", markup=False)
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        view = self.view
        self.item = view.items.get(self.item_uid)
        k = view.cube.items.index(self.item_uid)
        self.set_title(f"item {self.item_uid} · {view.cube.benchmarks[k]} · fragility "
                       f"{fmt_number(view.fragility[k])} · discrimination {fmt_number(view.discrimination[k])}")
        shown = item_text(self.item)
        truth = truth_text(view.truth, self.item_uid, view.cube.models)
        if truth is not None:
            shown.append("\n\n").append_text(truth)
        self.query_one("#item-text", Static).update(shown)
        self._fill_matrix(view, k)
        # only the groups and letters shown, the configs a letter alone does not name
        self.legend = clean(legend(view.cube.configs), one_line=True, limit=2000) + \
            " │ the cell under the cursor is explained below"
        self.query_one("#matrix-legend", Static).update(Text(self.legend, style="dim"))
        self.load_cells()
        self.query_one("#bit-matrix", DataTable).focus()

    def _fill_matrix(self, view, k: int) -> None:
        table = self.query_one("#bit-matrix", DataTable)
        self.columns = matrix_layout(list(view.cube.configs))
        labels = short_labels(view.cube.configs)
        width = model_width(self.columns, self.app.size.width)
        table.add_column(Text("model"), key="model", width=width)
        for n, config_id in enumerate(self.columns):
            if config_id is None:
                table.add_column(Text(" "), key=f"gap-{n}", width=1)
            else:
                table.add_column(Text(labels[config_id]), key=config_id, width=1)
        position = {c: j for j, c in enumerate(view.cube.configs)}
        for m, model in enumerate(view.cube.models):
            marks = [Text(" ") if c is None else
                     bit_mark(bool(view.cube.bits[m, k, position[c]]),
                              bool(view.cube.present[m, k, position[c]]))
                     for c in self.columns]
            name = clean(model, one_line=True, limit=200)
            if len(name) > width - 1:  # keep the end: it tells builds apart (+int4)
                name = "…" + name[-(width - 2):]
            table.add_row(Text(name.ljust(width)), *marks, key=model)
        self.query_one("#matrix-groups", Static).update(group_header(self.columns, width))
        if view.cube.configs:
            table.move_cursor(row=0, column=self.column_of(view.cube.configs[0]), animate=False)

    def column_of(self, config_id: str) -> int:
        """The matrix column index of a config (after the model column and the gaps)."""
        return 1 + self.columns.index(config_id)

    @work(thread=True, exclusive=True, group="item-cells", exit_on_error=False)
    def load_cells(self) -> None:
        try:
            rows = self.gateway.item_cells(self.view.grid, self.item_uid)
            chats = self.gateway.chat_templates(self.view.grid)
        except Exception as exc:  # the matrix stays useful without the cell details
            rows, chats = [], {}
            self.app.call_from_thread(self.app.notify, clean(exc, limit=300),
                                      title="could not load cells", severity="error",
                                      markup=False)
        self.post_message(CellsLoaded({(r["model"], r["config_id"]): r for r in rows}, chats))

    @on(CellsLoaded)
    def _cells_loaded(self, message: CellsLoaded) -> None:
        self.cells, self.chats = message.cells, message.chats
        self._mark_near_ties()
        self._show_cell()

    def _mark_near_ties(self) -> None:
        """Underline the marks of near-tie cells (decided inside the run's rounding
        tolerance: a flip there is not evidence of harness fragility)."""
        table = self.query_one("#bit-matrix", DataTable)
        near = [(model, config_id) for (model, config_id), cell in self.cells.items()
                if cell.get("near_tie") and config_id in self.columns
                and model in table.rows]
        for model, config_id in near:
            mark = table.get_cell(model, config_id)
            marked = mark.copy()
            base = Style.parse(mark.style) if isinstance(mark.style, str) else mark.style
            marked.style = base + Style(underline=True, reverse=True)
            table.update_cell(model, config_id, marked)
        if near:
            legend = self.query_one("#matrix-legend", Static)
            legend.update(Text(f"{self.legend} │ {len(near)} near-tie cell(s) underlined: "
                               "decided inside rounding, not evidence of fragility",
                               style="dim"))

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
        if config_id == "model" or config_id.startswith("gap-"):
            detail.update(Text("move onto a ✓/✗ cell to see what the model saw and said",
                               style="dim"))
            return
        detail.update(cell_detail(self.item, model, config_id, self.cells.get((model, config_id)),
                                  self.view.seed, self.chats.get(model), self.view.items))
