"""A table that holds any number of rows: it draws only the lines on screen.

Textual's DataTable builds every row it holds (20,000 rows: about 4 s before the cursor can
reach the last one), so ReportTable keeps the first MAX_ROWS_SHOWN. VirtualTable keeps the raw
rows (filter, sort, copy and export come from TableRows) and formats a row when it is drawn."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from fragility_tui.tui.cut_edge import mark_cut
from fragility_tui.tui.widgets import SORT_BINDING, TableRows

WIDTH_SAMPLE = 500  # rows measured for the column widths (a wider cell is cut with "…")
GAP = 1  # spaces between columns


class VirtualTable(TableRows, ScrollView, can_focus=True):
    """Row cursor, Enter selects (posts VirtualTable.RowSelected), header click or `o` sorts."""

    BINDINGS = [
        SORT_BINDING,
        Binding("up", "cursor(-1)", "Up", show=False, tooltip="Row up", id="table.up"),
        Binding("down", "cursor(1)", "Down", show=False, tooltip="Row down", id="table.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, tooltip="A page up",
                id="table.page-up"),
        Binding("pagedown", "page(1)", "Page down", show=False, tooltip="A page down",
                id="table.page-down"),
        Binding("home", "cursor_to(0)", "First row", show=False, tooltip="The first row",
                id="table.first-row"),
        Binding("end", "cursor_to(-1)", "Last row", show=False, tooltip="The last row",
                id="table.last-row"),
        Binding("enter", "select_row", "Select", show=False,
                tooltip="Drill down into the row", id="table.select"),
    ]
    COMPONENT_CLASSES = {"virtual-table--header", "virtual-table--cursor",
                         "virtual-table--even-row"}
    DEFAULT_CSS = """
    VirtualTable { background: $surface; color: $foreground; }
    VirtualTable > .virtual-table--header { text-style: bold; background: $panel; }
    VirtualTable > .virtual-table--even-row { background: $surface-lighten-1 50%; }
    VirtualTable > .virtual-table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
    }
    VirtualTable:focus > .virtual-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    """

    cursor_row: reactive[int] = reactive(0)

    class RowSelected(Message):
        def __init__(self, table: "VirtualTable", key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> "VirtualTable":
            return self.table

    def __init__(self, *, table_name: str = "table", **kwargs):
        super().__init__(**kwargs)
        self._init_rows(table_name)
        self.widths: list[int] = []
        self.header_height = 1  # lines: a column label may hold several ("o0 o1…\nLPDI LPDI…")

    # ---------------------------------------------------------------- TableRows hooks
    def _show(self) -> None:
        self.widths = self.column_widths(self.formatted(self.shown_rows[:WIDTH_SAMPLE]))
        width = sum(self.widths) + GAP * max(0, len(self.widths) - 1)
        self.header_height = max((c.label.count("\n") + 1 for c in self.columns_spec), default=1)
        self.virtual_size = Size(width, len(self.shown_rows) + self.header_height)
        self.cursor_row = min(self.cursor_row, max(0, len(self.shown_rows) - 1))
        self.refresh()

    def current_key(self) -> str | None:
        if not self.shown_rows:
            return None
        return self.shown_rows[min(self.cursor_row, len(self.shown_rows) - 1)][0]

    def select_key(self, key: str) -> None:
        for k, (row_key, _) in enumerate(self.shown_rows):
            if row_key == key:
                self.move_cursor(k)
                return

    @property
    def row_count(self) -> int:
        return len(self.shown_rows)

    # ---------------------------------------------------------------- cursor
    def move_cursor(self, row: int) -> None:
        if not self.shown_rows:
            return
        self.cursor_row = max(0, min(row, len(self.shown_rows) - 1))

    def watch_cursor_row(self, old: int, new: int) -> None:
        # keep the cursor visible below the fixed header lines
        body = max(1, self.scrollable_content_region.height - self.header_height)
        top = self.scroll_offset.y
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + body:
            self.scroll_to(y=new - body + 1, animate=False)
        self.refresh()

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction *
                         max(1, self.scrollable_content_region.height - self.header_height))

    def action_cursor_to(self, row: int) -> None:
        self.move_cursor(row if row >= 0 else len(self.shown_rows) - 1)

    def action_select_row(self) -> None:
        key = self.current_key()
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def on_click(self, event: Click) -> None:
        at = event.get_content_offset(self)
        if at is None:  # the border or a scrollbar
            return
        if at.y < self.header_height:  # the header: sort by the column under the pointer
            column = self._column_at(at.x + self.scroll_offset.x)
            if column is not None:
                self.sort_by(column)
            return
        self.move_cursor(self.scroll_offset.y + at.y - self.header_height)
        if event.chain == 2:
            self.action_select_row()

    def _column_at(self, x: int) -> int | None:
        left = 0
        for k, width in enumerate(self.widths):
            if left <= x < left + width + GAP:
                return k
            left += width + GAP
        return None

    # ---------------------------------------------------------------- drawing
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        if y < self.header_height:
            cells = [Text(self._label_line(k, y)) for k in range(len(self.widths))]
            style = self.get_component_rich_style("virtual-table--header")
        else:
            row = scroll_y + y - self.header_height
            if row >= len(self.shown_rows):
                return Strip.blank(width, self.rich_style)
            cells = self.formatted([self.shown_rows[row]])[0][1]
            style = self._row_style(row)
        line = mark_cut(self._join(cells), scroll_x + width)
        segments = list(line.render(self.app.console))
        strip = Strip(segments, line.cell_len).crop(scroll_x, scroll_x + width)
        strip = strip.extend_cell_length(width).apply_style(style)
        return strip.simplify()

    def _label_line(self, k: int, y: int) -> str:
        """Line y of column k's label, bottom-aligned (the sort mark ends the last line)."""
        lines = self.column_label(k).split("\n")
        pad = self.header_height - len(lines)
        return "" if y < pad else lines[y - pad]

    def _row_style(self, row: int) -> Style:
        base = self.rich_style
        if row == self.cursor_row:
            return base + self.get_component_rich_style("virtual-table--cursor")
        if row % 2:
            return base + self.get_component_rich_style("virtual-table--even-row")
        return base

    def _join(self, cells: list[Text]) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        for k, (cell, width) in enumerate(zip(cells, self.widths)):
            if k:
                line.append(" " * GAP)
            piece = cell.copy()
            piece.truncate(width, overflow="ellipsis")
            pad = width - piece.cell_len
            if piece.justify == "right":
                line.append(" " * pad)
                line.append_text(piece)
            else:
                line.append_text(piece)
                line.append(" " * pad)
        return line

