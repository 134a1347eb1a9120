"""The app's typed access to the store, for worker threads: one lock serialises calls (a
DuckDB connection is not thread-safe), and the store opens on first use the way the CLI
opens it (fragility_tui.bootstrap: the default store gets the shipped grids)."""

from __future__ import annotations

import dataclasses

import threading
from typing import TYPE_CHECKING, Callable, TypeVar

if TYPE_CHECKING:
    from fragility_tui.store.runs import RunRecord
    from fragility_tui.store.store import Store

T = TypeVar("T")


class StoreGateway:
    def __init__(self, db_path: str | None, store: Store | None = None, *,
                 load_samples: bool = False):
        self.db_path = db_path
        self.load_samples = load_samples  # the shipped grids on first use (the CLI's app)
        self._store = store
        self._lock = threading.Lock()
        self.on_progress = None  # (k, n, grid name) of each shipped grid a first start loads

    @property
    def path(self) -> str | None:
        if self.db_path or self._store is None:
            return self.db_path or None
        return str(self._store.path) or None

    def _call(self, work: Callable[["Store"], T]) -> T:
        """work(store) under the lock, opening the store on first use."""
        with self._lock:
            if self._store is None:
                from fragility_tui.bootstrap import open_store

                self._store = open_store(self.db_path, load_samples=self.load_samples or None,
                                         progress=self.on_progress)
            return work(self._store)

    def list_grids(self) -> list:
        return self._call(lambda store: store.list_grids())

    def load_grid(self, grid: str) -> tuple:
        """(cube, {item_uid: Item}, grid metadata) of a grid; the cube carries the grid's
        near-tie cells (the Bands pane counts the fragility only they make)."""
        cube = self._call(lambda store: store.load_cube(grid))
        near_tie = self._call(lambda store: store.near_tie_mask(grid, cube))
        if near_tie.any():
            cube = dataclasses.replace(cube, near_tie=near_tie)
        items = {it.item_uid: it for it in self._call(lambda store: store.load_items(grid))}
        return cube, items, self._call(lambda store: store.grid_meta(grid))

    def calibration_results(self, grid: str, key: str) -> dict:
        return self._call(lambda store: store.calibration_results(grid, key))

    def save_calibration(self, grid: str, key: str, results: dict) -> None:
        self._call(lambda store: store.save_calibration(grid, key, results))

    def model_costs(self, grid: str) -> dict:
        return self._call(lambda store: store.model_costs(grid))

    def item_cells(self, grid: str, item_uid: str) -> list[dict]:
        return self._call(lambda store: store.item_cells(grid, item_uid))

    def chat_templates(self, grid: str) -> dict:
        """{model: harness.chat.ChatTemplate}: each model's prompt mode and chat template as
        its provenance records them (what the item drill-down renders a prompt through)."""
        from fragility_tui.harness.chat import ChatTemplate

        # a model without a recorded prompt mode (synthetic, imported) is left out: nothing
        # is known of how it was prompted, and the drill-down says so
        return {row["model"]: ChatTemplate.from_provenance(row["provenance"])
                for row in self._call(lambda store: store.list_models(grid))
                if (row.get("provenance") or {}).get("prompt_mode")}

    def comparisons(self, grid: str, a: str, b: str, target: str) -> list[dict]:
        """The pair's recorded sequential comparisons under this target, the first first."""
        return self._call(lambda store: store.comparisons(grid, a, b, target))

    def first_comparison(self, grid: str, out: dict, live: bool, *, record: bool) -> dict:
        """`compare`'s own record of the pair's first comparison (services/comparisons.py):
        with `record`, this one is recorded as the CLI records it (a replay the app
        computes); without, only read (a live comparison its `compare` process records).
        `out` gains `first_comparison` and `independent_evidence`."""
        from fragility_tui.services.comparisons import first_comparison, read_first

        work = first_comparison if record else read_first
        return self._call(lambda store: work(store, grid, out, live))

    def runs(self) -> list[RunRecord]:
        """Every recorded run, newest first."""
        return self._call(lambda store: store.runs())
