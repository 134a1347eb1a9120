"""The open grid's session, without Textual: the selection, the two-phase computation of the
grid's view and the status lines that follow it. The app (tui/app.py) runs `views` in a
worker thread and shows what it yields; keeping this apart lets a test drive a session
without starting the app, and keeps the app to state, layout and intents."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from fragility_tui import settings
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.selection import Selection

if TYPE_CHECKING:
    from fragility_tui.grid.cube import Cube
    from fragility_tui.tui.view_model import GridView

FIRST_SECTIONS_CELLS = 5_000_000  # from this size a grid shows its bands before the rest


class GridReader(Protocol):
    """What the session reads from the store (tui.gateway.StoreGateway)."""

    def load_grid(self, name: str) -> tuple[Cube, list, dict]: ...


class GridSession:
    """One store's open-grid state: the selection, whether a computation is on its way, the
    grid's metadata as last read, and the timings the bench measures."""

    def __init__(self, reader: GridReader, before_read: Callable[[str], None]):
        self.reader = reader
        self.before_read = before_read  # called in the worker just before a grid is read
        self.selection = Selection()
        self.computing = False
        self.force_reload = False  # the next computation reads the grid again
        self.meta: dict = {}
        self.started_at = time.perf_counter()
        self.first_view_seconds: float | None = None  # start → first statistics on screen
        self.last_compute_seconds: float | None = None  # the last worker computation

    def open(self) -> None:
        """A grid switch: everything selected again."""
        self.selection = Selection()

    def start(self, grid: str, reload: bool = False) -> str:
        """On the UI thread, before the worker: the status line while it computes."""
        self.computing = True
        self.force_reload = self.force_reload or reload
        return f"computing {clean(grid, one_line=True, limit=60)} under the selection…"

    def views(self, grid: str, selection: Selection, shown: GridView | None,
              progress: Callable[[str], None]) -> Iterator[GridView]:
        """Worker thread: the view of `grid` under `selection`; a grid of
        FIRST_SECTIONS_CELLS or more first yields a partial view (bands, no bootstrap),
        then the full one on the same basis. The cube on screen is reused unless the grid
        changed or a reload was asked for."""
        reuse = shown is not None and shown.grid == grid and not self.force_reload
        self.force_reload = False
        if reuse:
            full, items, meta = shown.full, shown.items, self.meta
        else:
            progress(f"reading grid {grid}…")
            self.before_read(grid)  # runs' counts before the read: later cells reload
            full, items, meta = self.reader.load_grid(grid)
            self.meta = meta
        from fragility_tui.tui.view_model import build_view  # numpy: after the first frame

        shape, cells = full.bits.shape, int(full.present.sum())
        args = (grid, bool(meta.get("synthetic")), int(meta.get("seed") or 0), full, items,
                selection)
        progress(f"computing {grid}: {shape[0]} models × {shape[1]:,} items × {shape[2]} "
                 f"configs ({cells:,} cells; bootstrap intervals take longest)…")
        truth = meta.get("truth") if meta.get("synthetic") else None
        first = None  # bands first, the bootstrap statistics after, on one basis
        if cells >= FIRST_SECTIONS_CELLS:
            first = build_view(*args, first=True, truth=truth)
            yield first
        yield build_view(*args, truth=truth, basis=first and first.basis)

    def shows(self, view: GridView, shown: GridView | None, grid: str | None) -> bool:
        """Whether a computed view replaces the one on screen: not when a grid switch
        overtook it, nor a reload's partial view over the full one of the same selection."""
        if view.grid != grid:
            return False
        return not (view.partial and shown is not None and shown.grid == view.grid
                    and not shown.partial and shown.selection == view.selection)

    def shown(self, view: GridView, seconds: float) -> str:
        """On the UI thread, once `view` is on screen: the status line."""
        self.computing = view.partial
        if self.first_view_seconds is None:
            self.first_view_seconds = time.perf_counter() - self.started_at
        # measured by the bench, not shown: a clock on screen would make snapshots differ
        self.last_compute_seconds = seconds
        described = self.selection.describe(view.full)
        if view.partial:
            return (f"{described} · bands ready; the other statistics (bootstrap intervals) "
                    "are being computed…")
        return f"{described} · ready · s changes the selection · F1 help"

    def failed(self) -> None:
        self.computing = False


def default_grid(grids: list) -> str:
    """The grid opened at start: $FRAGILITY_TUI_GRID when it names one, else the grid with
    the most cells (the oldest of equals), which on a fresh `make run` store is the
    paper-size synthetic grid rather than a small shipped sample."""
    wanted = settings.start_grid()
    if wanted and any(g.name == wanted for g in grids):
        return wanted
    return max(grids, key=lambda g: g.cells).name  # max keeps the first of equals


def start_grid_note(grids: list) -> str | None:
    """What to tell when $FRAGILITY_TUI_GRID names no grid of the store (it was ignored
    without a word)."""
    wanted = settings.start_grid()
    if not wanted or any(g.name == wanted for g in grids):
        return None
    names = ", ".join(g.name for g in grids[:6]) + (" …" if len(grids) > 6 else "")
    return (f"FRAGILITY_TUI_GRID names no grid {clean(wanted)!r} in this store; opened "
            f"{clean(default_grid(grids))} instead (grids: {clean(names)})")


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
