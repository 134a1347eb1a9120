"""What the app's copy, export and screenshot keys do (c, C, x, P, and the command
palette): each acts on the table in view, the focused one or else the first of the top
drill-down screen or of the pane shown. Mixed into the app, which supplies `active_pane`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import TABLES, TableRows

if TYPE_CHECKING:
    from textual.app import App

    from fragility_tui.tui.panes import Pane

    _AppBase = App
else:
    _AppBase = object


class TableKeys(_AppBase):
    def active_pane(self) -> Pane:
        raise NotImplementedError  # the app's pane in view

    def current_table(self) -> TableRows | None:
        root = self.screen if len(self.screen_stack) > 1 else self.active_pane()
        focused = self.focused
        if isinstance(focused, TableRows) and root in focused.ancestors_with_self:
            return focused
        tables = list(root.query(TABLES))
        return tables[0] if tables else None

    def action_copy_row(self) -> None:
        table = self.current_table()
        if table is None or table.current_values() is None:
            self.notify("no row to copy", severity="warning")
            return
        self.copy_to_clipboard(table.as_tsv(only_current=True))
        self.notify("row copied (OSC 52)")

    def action_copy_table(self) -> None:
        table = self.current_table()
        if table is None:
            self.notify("no table to copy", severity="warning")
            return
        self.copy_to_clipboard(table.as_tsv())
        self.notify(f"table copied: {len(table.shown_rows):,} rows (OSC 52)")

    def action_export(self) -> None:
        table = self.current_table()
        if table is None:
            self.notify("no table to export", severity="warning")
            return
        from fragility_tui.tui.screens import ExportScreen

        default = f"fragility-{table.table_name}-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        self.push_screen(ExportScreen(default), lambda path: self._export_to(table, path))

    def _export_to(self, table: TableRows, path: str | None) -> None:
        if not path:
            return
        try:
            if path.rstrip().endswith(("/", os.sep)):  # Path() drops the slash: a file
                raise ValueError(f"{path} names a folder: name a file in it")
            written = table.export(Path(path).expanduser())
        except (OSError, ValueError) as exc:
            self.notify(clean(exc, limit=400), title="Export failed", severity="error",
                        markup=False)
            return
        self.notify(clean(f"exported {len(table.shown_rows):,} rows to {written}", limit=400),
                    markup=False)

    def action_svg_screenshot(self) -> None:
        name = f"fragility-{time.strftime('%Y%m%d-%H%M%S')}.svg"
        path = self.save_screenshot(filename=name, path=os.getcwd())
        self.notify(clean(f"screenshot saved: {path}", limit=400), markup=False)
