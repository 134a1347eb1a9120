"""Long-format import at scale: DuckDB validates and inserts, the dense cube is built on the
way (and finds duplicates), and the packed cube written with the grid equals one read back
from its cells."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fragility_tui.errors import InputError
from fragility_tui.store import long_grid
from fragility_tui.harness.configs import CONFIG_IDS
from fragility_tui.store.importer import import_long_grid, write_synthetic_grid
from fragility_tui.grid.simulate import simulate
from fragility_tui.store.store import Store


def _cold_cube(store: Store, grid: str):
    with store.connect() as con:
        return store.cube_from_cells(con, grid)


def _assert_cached_cube_is_the_cells(store: Store, grid: str) -> None:
    cube = store.load_cube(grid)  # the packed copy written with the grid
    models, configs, bits, present = _cold_cube(store, grid)
    assert cube.models == tuple(models) and cube.configs == tuple(configs)
    assert (cube.bits == bits).all() and (cube.present == present).all()


def _grid_file(path, rows: list[tuple]) -> None:
    model, item, config, correct = zip(*rows)
    pq.write_table(pa.table({"model": list(model), "item": list(item), "config": list(config),
                             "correct": list(correct)}), path)


def _rows(n_models=3, n_items=5, configs=CONFIG_IDS[:4], seed=1):
    rng = np.random.default_rng(seed)
    return [(f"m{m}", f"b/q{i}", c, bool(rng.random() < 0.5))
            for m in (2, 0, 1)[:n_models] for i in range(n_items) for c in configs]


def test_imported_cube_equals_the_cells_in_small_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(long_grid, "SCATTER_ROWS", 7)  # many batches, odd boundaries
    rows = _rows()
    rows = rows[::2] + rows[1::2]  # cells in no particular order; one missing below
    rows.pop(3)
    _grid_file(tmp_path / "g.parquet", rows)
    store = Store(tmp_path / "s.duckdb")
    summary = import_long_grid(store, tmp_path / "g.parquet", "g")
    assert summary["cells"] == len(rows) and summary["models"] == 3
    _assert_cached_cube_is_the_cells(store, "g")
    assert store.load_cube("g").present.sum() == len(rows)


def test_a_duplicate_in_another_batch_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(long_grid, "SCATTER_ROWS", 4)
    rows = _rows()
    rows.append(rows[2][:3] + (not rows[2][3],))  # row 3 again, as the last row
    _grid_file(tmp_path / "g.parquet", rows)
    store = Store(tmp_path / "s.duckdb")
    with pytest.raises(InputError, match=rf"row {len(rows)}, column 'item': duplicate cell "
                                         r"\(model 'm2', item 'b/q0', config o0.digit\); "
                                         r"first seen at row 3"):
        import_long_grid(store, tmp_path / "g.parquet", "g")
    assert store.list_grids() == []


def test_simulated_cube_is_written_as_it_is(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    grid = simulate(3, 30, seed=4)
    write_synthetic_grid(store, grid, "sim")
    _assert_cached_cube_is_the_cells(store, "sim")
    assert (store.load_cube("sim").bits == grid.cube.bits).all()
