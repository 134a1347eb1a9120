"""Widgets shared by the panes: a sortable, filterable, exportable table and text bars."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable, Static, Tabs

from fragility_tui.text import cut_middle, md_cell, visible_text
from fragility_tui.tui.cut_edge import mark_table_cut
from fragility_tui.tui.sanitize import cell, clean

DEFAULT_MAX_WIDTH = 40  # cells wider than this are cut with "…" (copy/export keep them whole)
MAX_ROWS_SHOWN = 500  # rows put in a DataTable (filling costs ~0.1 ms a row); copy/export get all


@dataclass
class Column:
    label: str
    kind: str = "text"  # text | name | pct | num | pts | rate | int | bool | marks | rich
    width: int = 0  # 0 = fit
    short: str = ""  # the header on screen where the label is too wide (copy/export: label)


def format_value(value, kind: str, width: int = 0) -> Text:
    """Raw value -> a markup-free, right-aligned-where-numeric cell."""
    if isinstance(value, Text):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Text("—", justify="left" if kind in ("text", "name") else "right", style="dim")
    if kind == "name":  # a model or grid: cut in the middle, keeping the end (+int4)
        name = clean(value, one_line=True, limit=200)
        return Text(cut_middle(name, width or DEFAULT_MAX_WIDTH))
    if kind == "pct":
        return Text(f"{100 * value:.1f}", justify="right")
    if kind == "num":
        return Text(f"{value:.3f}", justify="right")
    if kind == "pts":  # accuracy points: signed, one decimal
        return Text(f"{value:+.1f}", justify="right")
    if kind == "rate":  # tokens/s and the like: one decimal, thousands separated
        return Text(f"{value:,.1f}", justify="right")
    if kind == "int":
        return Text(f"{int(value):,}", justify="right")
    if kind == "bool":
        return Text("yes" if value else "no")
    if kind == "marks":  # a compact config row (tui.config_matrix), coloured when drawn
        return mark_text(value)
    return cell(value, width or DEFAULT_MAX_WIDTH)


def _column_width(label: str, col: Column, cells: list, k: int) -> int:
    """Fit the label and the widest shown cell, capped (explicit widths also work while the
    table is hidden, where DataTable's own auto-width measurement never runs)."""
    cap = col.width or DEFAULT_MAX_WIDTH
    widest = max((row[k].cell_len for _, row in cells if k < len(row)), default=0)
    label_width = max(len(line) for line in label.split("\n"))
    return max(1, min(cap, max(label_width, widest)))


def export_value(value, kind: str = "text"):
    """Raw value as written to CSV/Parquet/Markdown (text sanitised, numbers kept; a `pct`
    fraction in percent, as the table shows it, with no float noise such as 85.60000001)."""
    if isinstance(value, Text):
        return value.plain
    if kind == "pct" and isinstance(value, (int, float)) and not isinstance(value, bool) \
            and not math.isnan(value):
        return round(100 * value, 10)
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return clean(value, one_line=True)


class TableRows:
    """A table's raw rows, and what is done with them whatever draws them: filter, sort,
    cursor by key, copy and export. Mixed into ReportTable and VirtualTable, which fill
    `_show` (draw `shown_rows`), `current_key` and `select_key`."""

    def _init_rows(self, table_name: str) -> None:
        self.table_name = table_name
        self.columns_spec: list[Column] = []
        self.all_rows: list[tuple[str, list]] = []  # (row key, raw values)
        self.shown_rows: list[tuple[str, list]] = []
        self.filter_text = ""
        self.sort_column: int | None = None
        self.sort_reverse = False

    def set_data(self, columns: list[Column], rows: list[tuple[str, list]]) -> None:
        """Replace the table's contents; keeps the filter, sort and cursor row key."""
        self.columns_spec = columns
        self.all_rows = rows
        self._render_rows()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.lower()
        self._render_rows()

    def _render_rows(self) -> None:
        keep_key = self.current_key()
        rows = self.all_rows
        if self.filter_text:
            rows = [r for r in rows
                    if self.filter_text in " ".join(clean(v, one_line=True).lower()
                                                    if not isinstance(v, Text) else v.plain.lower()
                                                    for v in r[1])]
        if self.sort_column is not None:
            rows = sorted(rows, key=lambda r: _sort_key(r[1][self.sort_column]),
                          reverse=self.sort_reverse)
        self.shown_rows = rows
        self._show()
        if keep_key is not None:
            self.select_key(keep_key)

    def column_label(self, k: int) -> str:
        label = self.columns_spec[k].short or self.columns_spec[k].label
        if k == self.sort_column:
            label += " ▼" if self.sort_reverse else " ▲"
        return label

    def formatted(self, rows: list[tuple[str, list]]) -> list[tuple[str, list[Text]]]:
        return [(key, [format_value(v, c.kind, c.width) for v, c in zip(values, self.columns_spec)])
                for key, values in rows]

    def column_widths(self, cells: list[tuple[str, list[Text]]]) -> list[int]:
        return [_column_width(self.column_label(k), col, cells, k)
                for k, col in enumerate(self.columns_spec)]

    @property
    def caption_text(self) -> str:
        return f"{len(self.shown_rows):,} of {len(self.all_rows):,} rows"

    def current_values(self) -> list | None:
        key = self.current_key()
        for row_key, values in self.shown_rows:
            if row_key == key:
                return values
        return None

    def action_sort_next(self) -> None:
        self.sort_by(None)

    def sort_by(self, column: int | None) -> None:
        n = len(self.columns_spec)
        if not n:
            return
        if column is None:  # 'o': reverse the current column, then move on to the next
            if self.sort_column is not None and not self.sort_reverse:
                self.sort_reverse = True
            else:
                self.sort_column = 0 if self.sort_column is None else (self.sort_column + 1) % n
                self.sort_reverse = False
        elif column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, False
        self._render_rows()
        # A sort is read from its top: the cursor goes to the first row. Kept on its item,
        # it left the view scrolled to wherever that item landed, where rows look unsorted.
        if self.shown_rows:
            self.select_key(self.shown_rows[0][0])

    # ---------------------------------------------------------------- copy and export
    def header(self) -> list[str]:
        return [" ".join(c.label.split()) for c in self.columns_spec]

    def export_rows(self, only_current: bool = False) -> list[list]:
        """Rows as copied and exported: every value whole, a percentage column in percent
        as its header says (`ref %`: 85.6, not the fraction 0.856)."""
        rows = [self.current_values() or []] if only_current else [v for _, v in self.shown_rows]
        kinds = [c.kind for c in self.columns_spec]
        return [[export_value(v, kind) for v, kind in zip(row, kinds)] for row in rows]

    def as_tsv(self, only_current: bool = False) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter="\t", lineterminator="\n")
        if not only_current:
            writer.writerow(self.header())
        writer.writerows(self.export_rows(only_current))
        return buf.getvalue()

    def export(self, path: Path) -> Path:
        """Write the shown rows (filter and sort applied) as CSV, Parquet or Markdown."""
        return export_table(self.header(), self.export_rows(), path)


# A query for every table kind (ReportTable, tui.virtual_table.VirtualTable).
TABLES = "ReportTable, VirtualTable"

SORT_BINDING = Binding("o", "sort_next", "Sort", tooltip="Sort by the next column (again: reverse)",
                       id="table.sort")


class ReportTable(TableRows, DataTable):
    """A DataTable that keeps its raw rows, so it can sort, filter, copy and export them.
    For short tables (it holds at most MAX_ROWS_SHOWN rows); VirtualTable holds any number."""

    BINDINGS = [SORT_BINDING]

    def __init__(self, *, table_name: str = "table", **kwargs):
        kwargs.setdefault("cursor_type", "row")
        kwargs.setdefault("zebra_stripes", True)
        super().__init__(**kwargs)
        self._init_rows(table_name)

    def render_line(self, y: int):
        return mark_table_cut(self, y, super().render_line(y))  # a cut at the edge: …

    def _show(self) -> None:
        self.clear(columns=True)
        cells = self.formatted(self.shown_rows[:MAX_ROWS_SHOWN])
        for k, width in enumerate(self.column_widths(cells)):
            self.add_column(Text(self.column_label(k)), key=str(k), width=width)
        for key, row in cells:
            self.add_row(*row, key=key)

    @property
    def caption_text(self) -> str:
        note = super().caption_text
        if len(self.shown_rows) > MAX_ROWS_SHOWN:
            note += f" (first {MAX_ROWS_SHOWN:,} shown; filter with / to narrow)"
        return note

    def current_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # cursor outside a table being rebuilt
            return None

    def select_key(self, key: str) -> None:
        try:
            self.move_cursor(row=self.get_row_index(key), animate=False)
        except Exception:  # key filtered out
            pass

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(int(event.column_key.value))


def export_table(header: list[str], rows: list[list], path: Path) -> Path:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = {}
        for k, name in enumerate(header):
            values = [r[k] if k < len(r) else None for r in rows]
            if not all(v is None or isinstance(v, (int, float)) for v in values):
                values = [None if v is None else str(v) for v in values]
            columns[_unique(name, columns)] = values
        pq.write_table(pa.table(columns), path)
    elif suffix in (".md", ".markdown"):
        lines = ["| " + " | ".join(md_cell(h) for h in header) + " |",
                 "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(md_cell(v) for v in row) + " |" for row in rows]
        # a document a terminal may print: every control character a visible stand-in
        path.write_text(visible_text("\n".join(lines)) + "\n", encoding="utf-8")
    else:
        raise ValueError(f"{path}: unknown export format {suffix or '(none)'}; "
                         "use .csv, .parquet or .md")
    return path


def _unique(name: str, taken: dict) -> str:
    out, k = name, 2
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    return out


def _sort_key(value):
    """Numbers before text, None/NaN last, so mixed columns sort without errors."""
    if isinstance(value, Text):
        value = value.plain
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return (2, 0, "")
    if isinstance(value, (int, float, bool)):
        return (0, float(value), "")
    return (1, 0, str(value).lower())


# ---------------------------------------------------------------- the app's chrome
class PaneTabs(Tabs):
    """The pane bar: clickable, but never steals keyboard focus from the tables."""

    can_focus = False


class GridHeader(Static):
    """Grid name, a SYNTHETIC badge when the grid is simulated, the size and the selection."""

    def show(self, grid: str | None, synthetic: bool, detail: str) -> None:
        text = Text()
        if grid is None:
            text.append(" no grid open", style="dim")
        else:
            text.append(" grid: ")
            text.append(clean(grid, one_line=True, limit=80), style="bold")
            if synthetic:
                text.append("  ")
                text.append(" SYNTHETIC ", style="bold black on yellow")
        if detail:
            text.append("  " + detail, style="dim")
        self.update(text)


# ---------------------------------------------------------------- text bars
MARK_STYLES = {"✓": "bold green", "✗": "bold red", "·": "dim"}  # correct, wrong, no cell
# NO_COLOR: the monochrome filter turns red into grey 237 on a row's grey 235 and the ✗ was
# gone (issue 60): without colour ✓ is bold, ✗ the plain foreground, · dim, all legible
NO_COLOR_MARK_STYLES = {"✓": "bold", "✗": "not dim", "·": "dim"}


def mark_text(marks: str) -> Text:
    """✓/✗/· marks coloured (the glyphs carry the meaning without colour; under NO_COLOR
    no hue that the monochrome filter could turn into the background's grey)."""
    import os

    styles = NO_COLOR_MARK_STYLES if "NO_COLOR" in os.environ else MARK_STYLES
    text = Text()
    for ch in marks:
        text.append(ch, style=styles.get(ch, ""))
    return text


def band_bar(lo: float | None, hi: float | None, ref: float | None, mean: float | None,
             robust: float | None, width: int) -> Text:
    """One model's band on a 0–100 % scale: robust ▓, range ─, mean ◆, reference ●.

    Glyphs carry the meaning on their own (NO_COLOR, monochrome); colour only helps.
    """
    width = max(width, 10)
    cells = [" "] * width
    styles = [""] * width

    def pos(x: float) -> int:
        return min(width - 1, max(0, int(round(x * (width - 1)))))

    def known(x) -> bool:  # undefined (None/NaN) for a model with cells still to come
        return x is not None and not (isinstance(x, float) and math.isnan(x))

    if known(robust) and robust > 0:
        for k in range(0, pos(robust) + 1):
            cells[k], styles[k] = "▓", "blue"
    if known(lo) and known(hi):
        for k in range(pos(lo), pos(hi) + 1):
            cells[k], styles[k] = "─", "yellow"
        cells[pos(lo)], cells[pos(hi)] = "├", "┤"
        styles[pos(lo)] = styles[pos(hi)] = "yellow"
    if known(mean):
        cells[pos(mean)], styles[pos(mean)] = "◆", "magenta"
    if known(ref):
        cells[pos(ref)], styles[pos(ref)] = "●", "bold green"
    text = Text()
    for ch, st in zip(cells, styles):
        text.append(ch, style=st)
    return text


def hbar(value: float | None, width: int, style: str = "cyan") -> Text:
    """A fraction in [0, 1] as a bar of █ eighths (empty for undefined)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Text("—", style="dim")
    value = min(max(value, 0.0), 1.0)
    eighths = int(round(value * width * 8))
    full, part = divmod(eighths, 8)
    bar = "█" * full + ("" if part == 0 else " ▏▎▍▌▋▊▉"[part])
    return Text(bar.ljust(width, "·"), style=style)


def safe_title(title: str) -> Text:
    """A border title from text that may hold grid names (Text skips markup parsing)."""
    return Text(clean(title, one_line=True, limit=300))


class FormKeys:
    """Mixed into the container of a pane's form (run form, compare pickers). Esc leaves it
    from any field, back to the pane's table (an open dropdown closes first).

    A form whose `keeps_letters` is true keeps every printable key: one that no field
    consumed (focus on a button or a dropdown) is dropped instead of reaching the pane's and
    the app's letter bindings, which is how `u` and `k` once resumed and cancelled runs from
    the Start button (issue 24); and it says so to Textual (check_consume_key), so the footer
    does not offer those keys while the form has focus. A form that keeps nothing (the Compare
    pickers: a closed dropdown takes no letter) lets every key through: the pane's and the
    app's keys work there as anywhere in the pane. Enter, Tab, arrows, space and F-keys pass
    as usual."""

    keeps_letters = True

    def check_consume_key(self, key: str, character: str | None) -> bool:
        """The keys this form drops: Textual leaves them out of the footer (and out of the
        bindings) while a widget inside the form has focus."""
        return self.keeps_letters and key != "space" and character is not None \
            and character.isprintable()

    def on_key(self, event) -> None:
        from textual.widgets._select import SelectOverlay

        if event.key == "escape":
            if isinstance(self.app.focused, SelectOverlay):
                return  # the dropdown's own Esc closes it
            event.stop()
            event.prevent_default()
            owner = next((a for a in self.ancestors if hasattr(a, "focus_main")), None)
            if owner is not None:
                owner.focus_main()
            else:
                self.screen.set_focus(None)
        elif self.keeps_letters and event.is_printable and event.key != "space":
            event.stop()
            event.prevent_default()
