"""Text cut by a table's right edge ends in `…`, like a cell cut to its column's width.

A table wider than its pane scrolls sideways; the column at the edge was cut mid-word with
nothing to say so (Items' `earth_scien`, the Grids pane's `de`). Both table kinds mark it:
VirtualTable on the line it draws (`mark_cut`), ReportTable (a DataTable) on the strip
DataTable draws (`mark_table_cut`)."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip


def mark_cut(line: Text, edge: int) -> Text:
    """The line with `…` at its last column on screen (`edge`, exclusive) when a word runs
    on past it."""
    plain = line.plain
    if 0 < edge < len(plain) and line.cell_len == len(plain) and \
            plain[edge - 1] != " " and plain[edge] != " ":
        line = line.copy()
        line.plain = plain[:edge - 1] + "…" + plain[edge:]
    return line


def mark_table_cut(table, y: int, strip: Strip) -> Strip:
    """A DataTable's line `y` (as its render_line drew it) with `…` at the last column on
    screen when the cell there goes on past the edge. For tables of one-line rows and no
    fixed rows or columns (ReportTable)."""
    width = table.scrollable_content_region.width
    scroll_x, scroll_y = table.scroll_offset
    edge = scroll_x + width
    if table.virtual_size.width <= edge or width < 2 or table.fixed_rows or \
            table.fixed_columns:
        return strip
    if table.show_header and y == 0:
        texts = [column.label for column in table.ordered_columns]
    else:
        row = scroll_y + y - (1 if table.show_header else 0)
        if not 0 <= row < table.row_count:
            return strip
        texts = table.get_row_at(row)
    left, pad = 0, table.cell_padding
    for column, text in zip(table.ordered_columns, texts):
        span = column.get_render_width(table)
        if left <= edge - 1 < left + span:
            shown = edge - (left + pad)  # the cell's characters left of the edge
            length = min(Text(text).cell_len if isinstance(text, str) else
                         getattr(text, "cell_len", 0), span - 2 * pad)
            if 0 < shown < length:
                last = strip.crop(width - 1, width)
                style = next((seg.style for seg in last), None)
                return Strip([*strip.crop(0, width - 1), Segment("…", style),
                              *strip.crop(width, strip.cell_length)], strip.cell_length)
            return strip
        left += span
    return strip
