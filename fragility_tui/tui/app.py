"""The fragility-tui Textual app: eight panes over one grid, drill-downs on a screen stack.

Threads: every store read and every analysis runs in a `@work(thread=True)` worker that
posts a typed message; only message handlers touch widgets. Store calls are serialised by
one lock (a DuckDB connection is not thread-safe). The open grid's selection and the
computation of its view live in `GridSession` (tui/session.py, no Textual); the copy,
export and screenshot keys in `TableKeys` (tui/table_keys.py).
"""

from __future__ import annotations

import os
import time
from functools import partial
from typing import Iterable

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.reactive import var
from textual.screen import ModalScreen, Screen
from textual.widgets import Tab, Tabs

from fragility_tui.tui.bindings import APP_BINDINGS, help_rows
from fragility_tui.tui.chrome import FittingFooter, StatusLine
from fragility_tui.tui.compare_runs import CompareRuns
from fragility_tui.tui.filter_box import FilterBox
from fragility_tui.tui.gateway import StoreGateway
from fragility_tui.tui.live import GridWritten, LiveGrid, header_detail
from fragility_tui.tui.messages import (CompareQueued, GridChosen, GridsChanged, GridsListed,
                                        PaneMounted, RunsWrote, ShowItem, ShowModel, ShowPair,
                                        ShowRun, ViewReady, WorkFailed)
from fragility_tui.tui.panes import PANE_NAMES, Pane, pane_class
from fragility_tui.tui.panes.grids import GridsPane
from fragility_tui.tui.pane_switcher import PaneSwitcher
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.selection import Selection
from fragility_tui.tui.session import GridSession, default_grid, describe, start_grid_note
from fragility_tui.tui.startup import AfterFirstFrame, apply_keymap
from fragility_tui.tui.table_keys import TableKeys
from fragility_tui.tui.widgets import GridHeader, PaneTabs


class FragilityApp(TableKeys, App):
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
        self.guard_terminal = guard_terminal  # end on SIGHUP/SIGTERM or a lost terminal
        self.gateway = StoreGateway(db_path, store, load_samples=load_samples)
        self.gateway.on_progress = self._sample_progress
        self.live = LiveGrid(self)  # re-reads the open grid while a run writes into it
        self.session = GridSession(self.gateway, before_read=self.live.baseline)
        self.compare_runs = CompareRuns(self)  # a Compare form's two runs and their grid
        self.keymap: dict[str, str] = {}  # binding id -> keys, from the user's keymap.toml
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            self.animation_level = "none"  # over SSH, animations only cost bandwidth

    @property
    def computing(self) -> bool:
        return self.session.computing

    @property
    def last_compute_seconds(self) -> float | None:
        return self.session.last_compute_seconds

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield GridHeader(id="grid-header")
        yield PaneTabs(*(Tab(f"{k + 1} {title}", id=f"tab-{pane_id}")
                         for k, (pane_id, title, _) in enumerate(PANE_NAMES)), id="pane-tabs")
        with PaneSwitcher():
            yield self._bound(GridsPane(id=GridsPane.pane_id, gateway=self.gateway))
            for pane_id, _, _ in PANE_NAMES[1:]:
                # the hidden panes are imported and composed after the first frame
                yield AfterFirstFrame(make=partial(self._hidden_pane, pane_id))
        yield FilterBox()
        yield StatusLine(id="status")
        yield AfterFirstFrame(FittingFooter())  # its key list follows the first frame

    def _bound(self, pane: Pane) -> Pane:
        """The pane with the app's state handed down (data_bind): the open grid, its view and
        the grid list; run where the app is the active message pump (compose, or the app's
        loop: AfterFirstFrame)."""
        return pane.data_bind(FragilityApp.grids, FragilityApp.grid_name, FragilityApp.view)

    def _hidden_pane(self, pane_id: str) -> Pane:
        pane = pane_class(pane_id)(id=pane_id, gateway=self.gateway)
        pane.display = False
        return self._bound(pane)

    def on_mount(self) -> None:
        if self.guard_terminal:
            from fragility_tui.tui.hangup import HangupGuard

            HangupGuard(self).install()
        self.live.start()
        self.call_after_refresh(apply_keymap, self)  # every binding id: after the first frame
        self.main_screen.query_one(GridHeader).show(None, False, "")
        self.set_status("opening the store… (a first start loads the shipped grids: a few "
                        "seconds)")
        # after the first frame: the worker's imports (duckdb, numpy) would hold the GIL
        self.call_after_refresh(self.list_grids)

    # ---------------------------------------------------------------- the grids
    @work(thread=True, exclusive=True, group="grids", exit_on_error=False)
    def list_grids(self) -> None:
        try:
            grids = self.gateway.list_grids()
        except Exception as exc:  # shown to the user, not a crash
            self.post_message(WorkFailed("opening the store", describe(exc)))
            return
        self.post_message(GridsListed(grids))

    @on(GridsListed)
    def _grids_listed(self, message: GridsListed) -> None:
        self.grids = message.grids
        if self.compare_runs.listed(self.grids):
            pass  # it opened the grid a Compare form's runs write
        elif self.grid_name is None and self.grids:
            self.open_grid(default_grid(self.grids))  # $FRAGILITY_TUI_GRID, or the biggest
            note = start_grid_note(self.grids)
            if note:
                self.notify(note, severity="warning", timeout=10)
        elif not self.grids:
            self.set_status("this store holds no grid: create one with `fragility-tui simulate` "
                            "or `fragility-tui import`")

    def open_grid(self, name: str) -> None:
        self.session.open()
        self.grid_name = name
        self.recompute()

    def reload_grid(self) -> None:
        """Read the open grid from the store again (a run added cells), keeping the selection."""
        self.recompute(reload=True)

    def recompute(self, reload: bool = False) -> None:
        """Recompute the current grid under the current selection, off the UI thread."""
        if self.grid_name is not None:
            self.set_status(self.session.start(self.grid_name, reload))
            self._compute(self.grid_name, self.session.selection)

    @work(thread=True, exclusive=True, group="view", exit_on_error=False)
    def _compute(self, grid: str, selection: Selection) -> None:
        started = time.perf_counter()
        try:
            for view in self.session.views(grid, selection, self.view, self._progress):
                self.post_message(ViewReady(view, time.perf_counter() - started))
        except Exception as exc:
            self.post_message(WorkFailed(f"computing grid {grid!r}", describe(exc)))

    @on(ViewReady)
    def _view_ready(self, message: ViewReady) -> None:
        view = message.view
        if not self.screen_stack:  # closing: a late view finds no screen to show it on
            return
        if not self.session.shows(view, self.view, self.grid_name):
            return
        self.view = view
        self.main_screen.query_one(GridHeader).show(view.grid, view.synthetic,
                                                    header_detail(view.cube))
        self.set_status(self.session.shown(view, message.seconds))

    @on(WorkFailed)
    def _work_failed(self, message: WorkFailed) -> None:
        self.session.failed()
        self.set_status(f"error {message.what}: {clean(message.error, one_line=True, limit=300)}")
        self.notify(clean(message.error, limit=500), title=f"Error {message.what}",
                    severity="error", markup=False, timeout=8)

    def set_status(self, text: str) -> None:
        # closing, a late line (a worker's progress, a live reload) can find no screen, or
        # a screen whose widgets are already gone
        if self.screen_stack:
            for status in self.main_screen.query(StatusLine):
                status.show(text)

    def _progress(self, text: str) -> None:
        """The status line, from a worker thread."""
        self.call_from_thread(self.set_status, clean(text, one_line=True, limit=200))

    def _sample_progress(self, k: int, n: int, name: str) -> None:
        """From the store worker: a first start loads shipped grid k of n."""
        self._progress(f"first start: loading shipped grid {k} of {n}, {name} (once; a few "
                       "seconds)…")

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

    @on(GridWritten)
    def _grid_written(self, message: GridWritten) -> None:
        self.live.written(message.grid)  # reloads now, or once the debounce gap has passed

    @on(CompareQueued)
    def _compare_queued(self, message: CompareQueued) -> None:
        self.compare_runs.start(message.plan)

    @on(ShowModel)
    @on(ShowPair)
    @on(ShowItem)
    @on(ShowRun)
    def _drill_down(self, message: ShowModel | ShowPair | ShowItem | ShowRun) -> None:
        from fragility_tui.tui.screens import drill_screen  # numpy: not before the first frame

        self.push_screen(drill_screen(message, self.view, self.gateway))

    # ---------------------------------------------------------------- panes
    @property
    def main_screen(self) -> Screen:
        """The screen holding the panes (drill-downs and forms stack above it)."""
        return self.screen_stack[0]

    @property
    def panes(self) -> PaneSwitcher:
        return self.main_screen.query_one(PaneSwitcher)

    def pane(self, pane_id: str) -> Pane:
        return self.panes.pane(pane_id)

    def active_pane(self) -> Pane:
        return self.panes.active()

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
        if message.pane_id == self.panes.pending:
            self._show_pane(message.pane_id)

    @on(Tabs.TabActivated, "#pane-tabs")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        if self.is_running and self.screen_stack:
            self._show_pane(event.tab.id.removeprefix("tab-"))

    def _show_pane(self, pane_id: str) -> None:
        if self.panes.show(pane_id) is not None:
            self.main_screen.query_one(FilterBox).follow(pane_id)

    # ---------------------------------------------------------------- filter, back
    def action_filter(self) -> None:
        """Show the filter box (drill-down screens bind / to their own filter)."""
        self.main_screen.query_one(FilterBox).open()

    def action_back(self) -> None:
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif self.main_screen.query_one(FilterBox).close():
            self.active_pane().focus_main()

    # ---------------------------------------------------------------- selection, help, palette
    def action_selection(self) -> None:
        if self.view is None:
            self.notify("no grid open yet", severity="warning")
            return
        from fragility_tui.tui.screens import SelectionScreen

        self.push_screen(SelectionScreen(self.view.full, self.session.selection), self.choose_selection)

    def choose_selection(self, selection: Selection | None) -> None:
        """Recompute every pane for `selection` (None: the form was closed unchanged)."""
        if selection is not None and selection != self.session.selection:
            self.session.selection = selection
            self.recompute()

    def action_help(self) -> None:
        from fragility_tui.tui.screens import HelpScreen

        self.push_screen(HelpScreen(help_rows(self.keymap)))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from fragility_tui.tui.palette import app_commands

        yield from super().get_system_commands(screen)
        yield from app_commands(self)

