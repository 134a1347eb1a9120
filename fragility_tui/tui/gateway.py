"""The app's typed access to the store, for worker threads: one lock serialises calls (a
DuckDB connection is not thread-safe), and the store opens on first use the way the CLI
opens it (fragility_tui.bootstrap: the default store gets the shipped grids)."""

from __future__ import annotations

import threading


class StoreGateway:
    def __init__(self, db_path: str | None, store=None, *, load_samples: bool = False):
        self.db_path = db_path
        self.load_samples = load_samples  # the shipped grids on first use (the CLI's app)
        self._store = store
        self._lock = threading.Lock()
        self.on_progress = None  # (k, n, grid name) of each shipped grid a first start loads

    @property
    def path(self) -> str | None:
        return self.db_path or str(getattr(self._store, "path", "") or "") or None

    def _call(self, method: str, *args):
        with self._lock:
            if self._store is None:
                from fragility_tui.bootstrap import open_store

                self._store = open_store(self.db_path, load_samples=self.load_samples or None,
                                         progress=self.on_progress)
            return getattr(self._store, method)(*args)

    def list_grids(self) -> list:
        return self._call("list_grids")

    def load_grid(self, grid: str) -> tuple:
        """(cube, {item_uid: Item}, grid metadata) of a grid."""
        cube = self._call("load_cube", grid)
        items = {it.item_uid: it for it in self._call("load_items", grid)}
        return cube, items, self._call("grid_meta", grid)

    def calibration_results(self, grid: str, key: str) -> dict:
        return self._call("calibration_results", grid, key)

    def save_calibration(self, grid: str, key: str, results: dict) -> None:
        self._call("save_calibration", grid, key, results)

    def model_costs(self, grid: str) -> dict:
        return self._call("model_costs", grid)

    def item_cells(self, grid: str, item_uid: str) -> list[dict]:
        return self._call("item_cells", grid, item_uid)

    def list_runs(self) -> list[dict]:
        return self._call("list_runs")
