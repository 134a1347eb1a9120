"""The fragility-tui Textual app: eight panes over one grid, drill-downs on a screen stack.

Threads: every store read and every analysis runs in a `@work(thread=True)` worker that
posts a typed message; only message handlers touch widgets. Store calls are serialised by
one lock (a DuckDB connection is not thread-safe).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterable

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.reactive import var
from textual.screen import ModalScreen, Screen
from textual.widgets import ContentSwitcher, Footer, Input, Static, Tab, Tabs

from fragility_tui import settings
from fragility_tui.tui.bindings import APP_BINDINGS, help_rows
from fragility_tui.tui.compare_runs import CompareRuns
from fragility_tui.tui.gateway import StoreGateway
from fragility_tui.tui.live import GridWritten, LiveGrid, header_note
from fragility_tui.tui.messages import (GridChosen, GridsChanged, GridsListed, PaneMounted,
                                        RunsWrote, ShowItem, ShowModel, ShowPair, ShowRun,
                                        ViewReady, WorkFailed)
from fragility_tui.tui.panes import PANES, Pane
from fragility_tui.tui.panes.compare_form import CompareQueued
from fragility_tui.tui.selection import Selection
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.startup import AfterFirstFrame, apply_keymap
from fragility_tui.tui.widgets import TABLES, GridHeader, PaneTabs, TableRows

FIRST_SECTIONS_CELLS = 5_000_000  # from this size a grid shows its bands before the rest


class FragilityApp(App):
    """Explore a fragility grid: bands, pairs, items, axes, compression, runs, compare."""

    CSS_PATH = "app.tcss"
    TITLE = "fragility-tui"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = APP_BINDINGS

    # Handed down to every pane (data_bind): panes watch them and re-render when shown.
    grids: var[list | None] = var(None, always_update=True)  # None until the store is read
    grid_name: var[str | None] = var(None)
    view = var(None, always_update=True)  # tui.view_model.GridView of the open grid

    def __init__(self, db_path: str | None = None, *, store=None, load_samples: bool = False,
                 guard_terminal: bool = False):
        super().__init__()
        self.db_path = db_path
        self.guard_terminal = guard_terminal  # end on SIGHUP/SIGTERM or a lost terminal
        self.gateway = StoreGateway(db_path, store, load_samples=load_samples)
        self.gateway.on_progress = self._sample_progress
        self._grid_meta: dict = {}
        self._force_reload = False
        self._pending_pane: str | None = None  # a pane asked for before it was composed
        self.compare_runs = CompareRuns(self)  # a Compare form's two runs and their grid
        self.selection = Selection()
        self.computing = False
        self.started_at = time.perf_counter()
        self.keymap: dict[str, str] = {}  # binding id -> keys, from the user's keymap.toml
        self.first_view_seconds: float | None = None  # start → first statistics on screen
        self.last_compute_seconds: float | None = None  # the last worker computation
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            self.animation_level = "none"  # over SSH, animations only cost bandwidth

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield GridHeader(id="grid-header")
        yield PaneTabs(*(Tab(f"{k + 1} {p.title}", id=f"tab-{p.pane_id}")
                         for k, p in enumerate(PANES)), id="pane-tabs")
        with ContentSwitcher(initial="grids", id="panes"):
            for pane_cls in PANES:
                pane = pane_cls(id=pane_cls.pane_id, gateway=self.gateway)
                pane.data_bind(FragilityApp.grids, FragilityApp.grid_name, FragilityApp.view)
                if pane_cls.pane_id == "grids":
                    yield pane
                else:  # the hidden panes are composed after the first frame
                    pane.display = False
                    yield AfterFirstFrame(pane)
        yield Input(placeholder="filter (Enter to keep, Esc to close)", id="filter")
        yield Static("", id="status")
        yield AfterFirstFrame(Footer())  # its key list follows the first frame

    def on_mount(self) -> None:
        if self.guard_terminal:
            from fragility_tui.tui.hangup import HangupGuard

            HangupGuard(self).install()

        self.live = LiveGrid(self)  # re-reads the open grid while a run writes into it
        self.live.start()
        self.call_after_refresh(apply_keymap, self)  # every binding id: after the first frame
        self.main_screen.query_one(GridHeader).show(None, False, "")
        self.main_screen.query_one("#filter", Input).display = False
        self.set_status("opening the store… (a first start loads the shipped grids: a few "
                        "seconds)")
        # after the first frame: the worker's imports (duckdb, numpy) would hold the GIL
        self.call_after_refresh(self.list_grids)

    # ---------------------------------------------------------------- store access
    @property
    def store_path(self) -> str | None:
        return self.gateway.path

    @work(thread=True, exclusive=True, group="grids", exit_on_error=False)
    def list_grids(self) -> None:
        try:
            grids = self.gateway.list_grids()
        except Exception as exc:  # shown to the user, not a crash
            self.post_message(WorkFailed("opening the store", _describe(exc)))
            return
        self.post_message(GridsListed(grids))

    @on(GridsListed)
    def _grids_listed(self, message: GridsListed) -> None:
        self.grids = message.grids
        if self.compare_runs.listed(self.grids):
            pass  # it opened the grid a Compare form's runs write
        elif self.grid_name is None and self.grids:
            self.open_grid(default_grid(self.grids))
        elif not self.grids:
            self.set_status("this store holds no grid: create one with `fragility-tui simulate` "
                            "or `fragility-tui import`")

    def open_grid(self, name: str) -> None:
        self.selection = Selection()
        self.grid_name = name
        self.recompute()

    # ---------------------------------------------------------------- intents from panes
    @on(GridChosen)
    def _grid_chosen(self, message: GridChosen) -> None:
        if message.name != self.grid_name:
            self.open_grid(message.name)
        self.action_pane("bands")

    @on(GridsChanged)
    def _grids_changed(self) -> None:
        self.list_grids()

    @on(RunsWrote)
    def _runs_wrote(self, message: RunsWrote) -> None:
        self.list_grids()
        if self.grid_name in message.grids:
            self.reload_grid()

    @on(CompareQueued)
    def _compare_queued(self, message: CompareQueued) -> None:
        self.compare_runs.start(message.plan)

    @on(ShowModel)
    def _show_model(self, message: ShowModel) -> None:
        from fragility_tui.tui.screens import ModelScreen

        self.push_screen(ModelScreen(self.view, message.model))

    @on(ShowPair)
    def _show_pair(self, message: ShowPair) -> None:
        from fragility_tui.tui.screens import PairScreen

        self.push_screen(PairScreen(self.view, message.a, message.b))

    @on(ShowItem)
    def _show_item(self, message: ShowItem) -> None:
        from fragility_tui.tui.screens import ItemScreen

        self.push_screen(ItemScreen(self.view, self.gateway, message.item_uid))

    @on(ShowRun)
    def _show_run(self, message: ShowRun) -> None:
        from fragility_tui.tui.screens import ProvenanceScreen

        self.push_screen(ProvenanceScreen(message.run))

    def reload_grid(self) -> None:
        """Read the open grid from the store again (a run added cells), keeping the selection."""
        self._force_reload = True
        self.recompute()

    def recompute(self) -> None:
        """Recompute the current grid under the current selection, off the UI thread."""
        if self.grid_name is None:
            return
        self.computing = True
        self.set_status(f"computing {clean(self.grid_name, one_line=True, limit=60)} "
                        f"under the selection…")
        self._compute(self.grid_name, self.selection)

    @work(thread=True, exclusive=True, group="view", exit_on_error=False)
    def _compute(self, grid: str, selection: Selection) -> None:
        started = time.perf_counter()
        try:
            reuse = self.view is not None and self.view.grid == grid and not self._force_reload
            self._force_reload = False
            if reuse:
                full, items, meta = self.view.full, self.view.items, self._grid_meta
            else:
                self._progress(f"reading grid {grid}…")
                self.live.baseline(grid)  # runs' counts before the read: later cells reload
                full, items, meta = self.gateway.load_grid(grid)
                self._grid_meta = meta
            from fragility_tui.tui.view_model import build_view  # numpy: after the first frame

            shape, cells = full.bits.shape, int(full.present.sum())
            args = (grid, bool(meta.get("synthetic")), int(meta.get("seed") or 0), full, items,
                    selection)
            self._progress(f"computing {grid}: {shape[0]} models × {shape[1]:,} items × "
                           f"{shape[2]} configs ({cells:,} cells; bootstrap intervals take "
                           "longest)…")
            truth = meta.get("truth") if meta.get("synthetic") else None
            first = None  # bands first, the bootstrap statistics after, on one basis:
            if cells >= FIRST_SECTIONS_CELLS:
                first = build_view(*args, first=True, truth=truth)
                self.post_message(ViewReady(first, time.perf_counter() - started))
            view = build_view(*args, truth=truth, basis=first and first.basis)
        except Exception as exc:
            self.post_message(WorkFailed(f"computing grid {grid!r}", _describe(exc)))
            return
        self.post_message(ViewReady(view, time.perf_counter() - started))

    @on(ViewReady)
    def _view_ready(self, message: ViewReady) -> None:
        if message.view.grid != self.grid_name:
            return  # a grid switch overtook this computation
        if message.view.partial and self.view is not None and \
                self.view.grid == message.view.grid and not self.view.partial and \
                self.view.selection == message.view.selection:
            return  # the full view of a reload is on screen: keep it until the new one
        self.view = message.view
        self.computing = message.view.partial
        if self.first_view_seconds is None:
            self.first_view_seconds = time.perf_counter() - self.started_at
        cube = message.view.cube
        detail = " · ".join(filter(None, [f"{len(cube.models)} models × {len(cube.items):,} "
                                          f"items × {len(cube.configs)} configs",
                                          header_note(cube)]))
        self.main_screen.query_one(GridHeader).show(self.view.grid, self.view.synthetic, detail)
        self.last_compute_seconds = message.seconds  # measured by the bench, not shown:
        # a clock on screen would make every snapshot differ
        if message.view.partial:
            self.set_status(f"{self.selection.describe(message.view.full)} · bands ready; "
                            "the other statistics (bootstrap intervals) are being computed…")
            return
        self.set_status(f"{self.selection.describe(message.view.full)} · ready · "
                        "s changes the selection · F1 help")

    @on(WorkFailed)
    def _work_failed(self, message: WorkFailed) -> None:
        self.computing = False
        self.set_status(f"error {message.what}: {clean(message.error, one_line=True, limit=300)}")
        self.notify(clean(message.error, limit=500), title=f"Error {message.what}",
                    severity="error", markup=False, timeout=8)

    def set_status(self, text: str) -> None:
        if not self.screen_stack:  # closing: a late line (a worker's progress) has no screen
            return
        self.main_screen.query_one("#status", Static).update(Text(text))

    def _progress(self, text: str) -> None:
        """The status line, from a worker thread."""
        self.call_from_thread(self.set_status, clean(text, one_line=True, limit=200))

    def _sample_progress(self, k: int, n: int, name: str) -> None:
        """From the store worker: a first start loads shipped grid k of n."""
        self._progress(f"first start: loading shipped grid {k} of {n}, {name} (once; a few "
                       "seconds)…")

    # ---------------------------------------------------------------- panes
    @property
    def main_screen(self) -> Screen:
        """The screen holding the panes (drill-downs and forms stack above it)."""
        return self.screen_stack[0]

    def pane(self, pane_id: str) -> Pane:
        return self.main_screen.query_one(f"#{pane_id}", Pane)

    def active_pane(self) -> Pane:
        return self.pane(self.main_screen.query_one(ContentSwitcher).current or "grids")

    def action_pane(self, pane_id: str) -> None:
        from fragility_tui.tui.screens import DrillScreen

        if isinstance(self.screen, ModalScreen):
            return  # a form or the help is open: digits belong to it
        while isinstance(self.screen, DrillScreen):
            self.pop_screen()
        self.main_screen.query_one(PaneTabs).active = f"tab-{pane_id}"
        self._show_pane(pane_id)

    @on(PaneMounted)
    def _pane_mounted(self, message: PaneMounted) -> None:
        if message.pane_id == self._pending_pane:
            self._show_pane(message.pane_id)

    @on(Tabs.TabActivated, "#pane-tabs")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        if self.is_running and self.screen_stack:
            self._show_pane(event.tab.id.removeprefix("tab-"))

    def _show_pane(self, pane_id: str) -> None:
        if not self.main_screen.query(f"#{pane_id}"):  # asked for before it is composed
            self._pending_pane = pane_id  # shown on its PaneMounted
            return
        self._pending_pane = None
        switcher = self.main_screen.query_one(ContentSwitcher)
        if switcher.current != pane_id:
            switcher.current = pane_id
        pane = self.pane(pane_id)
        if pane.stale:
            pane.refresh_pane()
        pane.focus_main()
        self._apply_filter_to(pane)

    # ---------------------------------------------------------------- filter
    def action_filter(self) -> None:
        """Show the filter box (drill-down screens bind / to their own filter)."""
        box = self.main_screen.query_one("#filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.active_pane().apply_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.active_pane().focus_main()

    def _apply_filter_to(self, pane: Pane) -> None:
        pane.apply_filter(self.main_screen.query_one("#filter", Input).value)

    def action_back(self) -> None:
        box = self.main_screen.query_one("#filter", Input)
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif box.display:
            box.value = ""
            box.display = False
            self.active_pane().focus_main()

    # ---------------------------------------------------------------- selection, help
    def action_selection(self) -> None:
        if self.view is None:
            self.notify("no grid open yet", severity="warning")
            return
        from fragility_tui.tui.screens import SelectionScreen

        self.push_screen(SelectionScreen(self.view.full, self.selection), self._selection_done)

    def _selection_done(self, selection: Selection | None) -> None:
        if selection is not None and selection != self.selection:
            self.selection = selection
            self.recompute()

    def action_help(self) -> None:
        from fragility_tui.tui.screens import HelpScreen

        self.push_screen(HelpScreen(help_rows(self.keymap)))

    # ---------------------------------------------------------------- copy, export, screenshot
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

    # ---------------------------------------------------------------- command palette
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from fragility_tui.tui.palette import app_commands

        yield from super().get_system_commands(screen)
        yield from app_commands(self)

    # ---------------------------------------------------------------- live grids
    @on(GridWritten)
    def _grid_written(self, message: GridWritten) -> None:
        self.live.written(message.grid)  # reloads now, or once the debounce gap has passed


def default_grid(grids: list) -> str:
    """The grid opened at start: $FRAGILITY_TUI_GRID when it names one, else the grid with
    the most cells (the oldest of equals), which on a fresh `make run` store is the
    paper-size synthetic grid rather than a small shipped sample."""
    wanted = settings.start_grid()
    if wanted and any(g.name == wanted for g in grids):
        return wanted
    return max(grids, key=lambda g: g.cells).name  # max keeps the first of equals


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
