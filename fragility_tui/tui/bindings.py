"""Every key binding of the app, by id: the app-wide ones, and the list the help screen
shows with the user's keymap applied (keymap.toml remaps a binding by its id)."""

from __future__ import annotations

from textual.binding import Binding

from fragility_tui.tui.panes import PANE_NAMES
from fragility_tui.tui.widgets import ReportTable

APP_BINDINGS = [  # by the panes' names: their classes load after the first frame
    *(Binding(str(k + 1), f"pane('{pane_id}')", title, show=False,
              tooltip=f"Show the {title} pane", id=f"pane.{pane_id}")
      for k, (pane_id, title, _) in enumerate(PANE_NAMES)),
    Binding("f1", "help", "Help", tooltip="List every binding", id="app.help"),
    Binding("question_mark", "help", "Help", show=False,
            tooltip="List every binding (as F1)", id="app.help-alt"),
    Binding("slash", "filter", "Filter", tooltip="Filter the current table", id="app.filter"),
    Binding("s", "selection", "Selection", tooltip="Choose configs / models / benchmarks",
            id="app.selection"),
    Binding("c", "copy_row", "Copy row", tooltip="Copy the current row (OSC 52)",
            id="app.copy-row"),
    Binding("C", "copy_table", "Copy table", show=False, tooltip="Copy the whole table",
            id="app.copy-table"),
    Binding("x", "export", "Export", tooltip="Export the table: CSV, Parquet, Markdown",
            id="app.export"),
    Binding("P", "svg_screenshot", "Screenshot", show=False,
            tooltip="Save an SVG screenshot", id="app.screenshot"),
    Binding("escape", "back", "Back", show=False, tooltip="Go back / close the filter",
            id="app.back"),
    Binding("q", "quit", "Quit", tooltip="Quit (runs keep going)", id="app.quit"),
]


def binding_sources() -> list[tuple[str, list]]:
    """(where, bindings) for every class that declares bindings."""
    from fragility_tui.tui.screens import DrillScreen, HelpScreen, ModelScreen, SelectionScreen
    from fragility_tui.tui.screens.forms import ExportScreen
    from fragility_tui.tui.confirm import ConfirmScreen
    from fragility_tui.tui.panes.compare_form import CompareFormScreen
    from fragility_tui.tui.panes import PANES
    from fragility_tui.tui.virtual_table import VirtualTable

    long_tables = [b for b in VirtualTable.BINDINGS if b not in ReportTable.BINDINGS]
    sources = [("everywhere", APP_BINDINGS), ("tables", ReportTable.BINDINGS),
               ("Items table", long_tables),
               ("drill-downs", DrillScreen.BINDINGS), ("selection form", SelectionScreen.BINDINGS),
               ("help", HelpScreen.BINDINGS), ("export form", ExportScreen.BINDINGS),
               ("confirm question", ConfirmScreen.BINDINGS),
               ("Compare form", CompareFormScreen.BINDINGS),
               ("model drill-down", ModelScreen.BINDINGS)]
    sources += [(f"{p.title} pane", p.BINDINGS) for p in PANES if "BINDINGS" in p.__dict__]
    return sources


def binding_ids() -> set[str]:
    return {b.id for _, bindings in binding_sources() for b in bindings if b.id}


def help_rows(keymap: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(keys, does, where, binding id) for every binding, with the user's keymap applied."""
    panes = ", ".join(f"{k + 1} {title}" for k, (_, title, _) in enumerate(PANE_NAMES))
    rows = [("1 … 8", f"switch pane: {panes}", "everywhere", "pane.<name>")]
    for where, bindings in binding_sources():
        for b in bindings:
            if b.id and b.id.startswith("pane.") and b.id not in keymap:
                continue  # the default digits: the first row says them
            rows.append((_key_label(keymap.get(b.id, b.key)), b.tooltip or b.description,
                         where, b.id or ""))
    rows += [("ctrl+p", "command palette: panes, selections, copy, export, screenshot",
              "everywhere", ""),
             ("↑ ↓ ← → PgUp PgDn Home End", "move in a table", "tables", ""),
             ("Enter", "drill down (model, pair, item, run)", "tables", ""),
             ("Tab / shift+Tab", "move focus between widgets", "everywhere", ""),
             ("ctrl+q", "quit", "everywhere", "")]
    return rows


def _key_label(key: str) -> str:
    names = {"question_mark": "?", "slash": "/", "escape": "Esc", "up": "↑", "down": "↓",
             "pageup": "PgUp", "pagedown": "PgDn", "home": "Home", "end": "End",
             "enter": "Enter"}
    return ", ".join(names.get(k, k) for k in key.split(","))
