"""Live grids: while a run writes into the open grid, the app re-reads it after the run's
batches commit — at most once every MIN_GAP_SECONDS, never on the UI thread.

A watcher reads the runs of the open grid every POLL_SECONDS in a worker thread (one small
query, plus the tail of each active run's events file) and compares each run's committed
cell count with the last one seen. The query is skipped while no run of the grid is active
and the store's file and write-ahead log are as they were at the last query (a commit
changes one of them): an idle app then costs a stat a second, not a DuckDB connection
(~20 ms of CPU, 2% of a core), with a query at least every FULL_CHECK_SECONDS all the same.
The counts seen are first taken just before the app reads the grid (`baseline`), so cells
committed after that read are noticed even when their run ends before the next poll (a
short run on a loaded machine), and a run that starts and ends between two polls counts
too. A change posts `GridWritten`; the app then reloads the grid in its own worker, unless
it reloaded less than MIN_GAP_SECONDS ago, in which case one reload is scheduled for when
the gap has passed (debounce: a run committing a batch every 100 ms costs one reload every
few seconds, not ten a second).

Which models are provisional (items still to come) is read from the cube itself
(`coverage`): a model with cells for some of the grid's items but not all."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

from textual.message import Message

if TYPE_CHECKING:
    from fragility_tui.grid.cube import Cube
    from fragility_tui.store.runs import RunRecord

POLL_SECONDS = 1.0
MIN_GAP_SECONDS = 3.0
# A query even when the store's files look untouched: a file system with coarse timestamps
# could hide a run that started and ended within one tick.
FULL_CHECK_SECONDS = 30.0


@dataclass
class GridWritten(Message):
    """Runs committed new cells into this grid (a watcher's poll saw their counts move)."""

    grid: str


class RunReader(Protocol):
    @property
    def path(self) -> str | None: ...
    def runs(self) -> list[RunRecord]: ...


def store_stamp(path: str | None) -> tuple | None:
    """(mtime, size, inode) of the store's file and of its write-ahead log (None for one
    that is not there): a commit changes one of them. None when the path is not known."""
    if not path:
        return None
    stamps = []
    for name in (path, path + ".wal"):
        try:
            st = os.stat(name)
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(stamps)


class LiveHost(Protocol):
    """The app (tui/app.FragilityApp) as the watcher uses it."""

    gateway: RunReader
    grid_name: str | None
    screen_stack: list

    @property
    def computing(self) -> bool: ...
    def reload_grid(self) -> None: ...
    def post_message(self, message: Message) -> bool: ...
    def set_interval(self, interval: float, callback: Callable[[], object]) -> object: ...
    def set_timer(self, delay: float, callback: Callable[[], object]) -> object: ...
    def run_worker(self, work: Callable[[], object], *, thread: bool, group: str,
                   exit_on_error: bool) -> object: ...


class LiveGrid:
    """The open grid's watcher."""

    def __init__(self, app: LiveHost):
        self.app = app
        self.seen: dict[str, int] = {}  # run_id -> cells done, for runs of `grid`
        self.grid: str | None = None
        self.lock = threading.Lock()  # `grid` and `seen` change together (two threads)
        self.last_reload = 0.0
        self.pending = None  # the scheduled reload's timer, while one waits
        self.checking = False  # a poll's worker is reading the runs
        self.active = False  # a run of `grid` was active at the last read
        self.stamp: tuple | None = None  # store_stamp() just before the last read
        self.last_read = 0.0  # time.monotonic() of the last read

    def start(self) -> None:
        self.app.set_interval(POLL_SECONDS, self.poll)

    def poll(self) -> None:
        grid = self.app.grid_name
        if grid is None or self.checking:  # a slow store: skip a tick, never pile up
            return
        self.checking = True
        self.app.run_worker(lambda: self._check(grid), thread=True, group="live",
                            exit_on_error=False)

    def _check(self, grid: str) -> None:
        """Worker thread: a GridWritten when a run of the grid committed cells since the
        last poll (the first poll of a grid only learns the counts)."""
        try:
            if not self._unchanged(grid):
                self._compare_counts(grid)
        finally:
            self.checking = False

    def _unchanged(self, grid: str) -> bool:
        """Nothing can have moved since the last read: the same grid, no run of it active
        then (an active run's count comes from its events file), the store's files as they
        were, and the last read recent."""
        return (grid == self.grid and not self.active and self.stamp is not None
                and time.monotonic() - self.last_read < FULL_CHECK_SECONDS
                and store_stamp(self.app.gateway.path) == self.stamp)

    def baseline(self, grid: str) -> None:
        """Worker thread, just before the app reads `grid` from the store: the counts to
        compare later polls with. Without one (the store was busy), the next poll only
        learns the counts."""
        try:
            counts, read = self._counts(grid)
        except Exception:  # the grid's read reports a store problem, not the watcher
            counts, grid, read = {}, None, (None, 0.0, False)
        with self.lock:
            self.grid, self.seen = grid, counts
            self.stamp, self.last_read, self.active = read

    def _counts(self, grid: str) -> tuple[dict[str, int], tuple]:
        """Cells done per run of `grid`: the events file's latest count while a run is
        active, the record's once it ended (no file read per finished run); and the read's
        (stamp, last_read, active), which a poll compares to skip the next read, set with
        the counts."""
        from fragility_tui.processes import run_progress  # not before the app's first frame
        from fragility_tui.store.runs import RunStatus

        stamp, read = store_stamp(self.app.gateway.path), time.monotonic()  # before the read
        runs = [run for run in self.app.gateway.runs() if run.grid == grid]
        active = any(run.status in RunStatus.active() for run in runs)
        return {run.run_id: (run_progress(run).done if run.status in RunStatus.active()
                             else run.cells_done or 0) for run in runs}, (stamp, read, active)

    def _compare_counts(self, grid: str) -> None:
        counts, read = self._counts(grid)
        with self.lock:
            first, before = grid != self.grid, self.seen
            self.grid, self.seen = grid, counts
            self.stamp, self.last_read, self.active = read
        if not first and any(counts[r] != before.get(r, 0) for r in counts):
            self.app.post_message(GridWritten(grid))

    def written(self, grid: str) -> None:
        """On the UI thread: reload now, or once when the gap since the last reload ends."""
        if grid != self.app.grid_name or self.pending is not None:
            return
        wait = self.last_reload + MIN_GAP_SECONDS - time.monotonic()
        if wait > 0:
            self.pending = self.app.set_timer(wait, self._reload_later)
            return
        self._reload()

    def _reload_later(self) -> None:
        self.pending = None
        self._reload()

    def _reload(self) -> None:
        if not self.app.screen_stack:  # the app is closing (a timer outlived its screens)
            return
        if self.app.computing:  # a computation is on its way: come back after the gap
            self.pending = self.app.set_timer(MIN_GAP_SECONDS, self._reload_later)
            return
        self.last_reload = time.monotonic()
        self.app.reload_grid()


@dataclass(frozen=True)
class Coverage:
    """A model's items with at least one cell in view, of the grid's items."""

    model: str
    evaluated: int
    total: int

    @property
    def provisional(self) -> bool:
        return 0 < self.evaluated < self.total

    def label(self) -> str:
        return f"provisional: {self.evaluated:,} of {self.total:,} items"


def coverage(cube: Cube, models=None) -> list[Coverage]:
    """Per model (all, or those named), in the cube's order."""
    evaluated = cube.present.any(axis=2).sum(axis=1).tolist()
    wanted = set(cube.models if models is None else models)
    return [Coverage(m, int(evaluated[k]), len(cube.items))
            for k, m in enumerate(cube.models) if m in wanted]


def pair_coverage(cube: Cube, a: str, b: str) -> Coverage | None:
    """The items both models have cells for, when either still has items to come."""
    both = coverage(cube, (a, b))
    if not any(c.provisional for c in both):
        return None
    ia, ib = cube.models.index(a), cube.models.index(b)
    paired = (cube.present[ia].any(axis=1) & cube.present[ib].any(axis=1)).sum()
    return Coverage(f"{a} vs {b}", int(paired), len(cube.items))


def header_note(cube: Cube) -> str:
    """The header's word on provisional models: '' when none."""
    parts = [f"{c.model} {c.evaluated:,} of {c.total:,}" for c in coverage(cube)
             if c.provisional]
    if not parts:
        return ""
    shown = "; ".join(parts[:2]) + (f"; +{len(parts) - 2} more" if len(parts) > 2 else "")
    return f"provisional: {shown} items"


def header_detail(cube: Cube) -> str:
    """The header's line under the grid's name: its shape, and its provisional models."""
    shape = (f"{len(cube.models)} models × {len(cube.items):,} items × {len(cube.configs)} "
             "configs")
    return " · ".join(filter(None, [shape, header_note(cube)]))
