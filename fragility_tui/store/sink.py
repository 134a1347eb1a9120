"""`CellSink`: what the run loop (runners/run/loop.py) needs from the place it writes to.

Two classes implement it: `Store` (the DuckDB file) and `PartsStore` (a worker's folder of
Parquet parts, store/parts.py). The loop is typed against this protocol and calls only
these methods, so it never asks which one it has (tests/store/test_sink.py checks that both
accept every call written here).
"""

from __future__ import annotations

from os import PathLike
from typing import Callable, Protocol, runtime_checkable

from fragility_tui.items.item import Item
from fragility_tui.store.runs import RunRecord
from fragility_tui.store.schema import CellRow


@runtime_checkable
class CellSink(Protocol):
    # -- the run's own record
    def create_run(self, run: dict, /) -> str:
        """Record a new run (fields of RunRecord, status queued unless given); its id."""

    def get_run(self, run_id: str, /) -> RunRecord | None: ...

    def update_run(self, run_id: str, /, **fields) -> None: ...

    def events_path_for(self, run_id: str, /) -> str | PathLike | None:
        """Where the run's events go; None: the runner's default place."""

    def slots_dir(self) -> PathLike | None:
        """Where runs take their device slots (fragility_tui/slots.py); None: no queue
        (a cluster worker's GPUs are handed out by its scheduler)."""

    # -- the grid, its items and models
    def has_grid(self, grid: str, /) -> bool: ...

    def grid_meta(self, grid: str, /) -> dict: ...

    def create_grid(self, grid: str, /, *, seed: int, item_set_hash: str | None,
                    description: str, meta: dict | None) -> None: ...

    def claim_grid(self, grid: str, items: list[Item], /, *, positions: list[int] | None,
                   seed: int, set_hash: str, description: str, meta: dict | None,
                   check: Callable[[dict | None], None]) -> int:
        """When the run starts writing: check the grid's settings as they are now (None: no
        grid yet; `check` raises to refuse), create the grid if absent and add the run's
        items, with nothing in between (store/grid_claim.py). New items' count."""

    def add_items(self, grid: str, items: list[Item], /, *,
                  positions: list[int] | None = None) -> int: ...

    def check_model(self, grid: str, model: str, fingerprint: dict, /) -> None:
        """Raise FingerprintMismatch when the model's cells here were made otherwise."""

    def record_model(self, grid: str, model: str, /, *, fingerprint: dict,
                     source: str | None, revision: str | None, dtype: str | None,
                     quantization: str | None, base_model: str | None,
                     provenance: dict) -> None: ...

    # -- cells
    def done_keys(self, grid: str, model: str, /) -> set[tuple[str, str]]:
        """(item_uid, config_id) of the model's cells already written."""

    def write_cells(self, grid: str, rows: list[CellRow], /) -> int:
        """Write one batch (cells already there are kept); the number of new cells."""
