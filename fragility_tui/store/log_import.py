"""Write planned log imports (imports/pipeline.py) into a grid, in one transaction: the
grid (created if absent), the items the logs need, each model with the log's provenance,
each imported config's axes, and the cells. A (model, config) the grid already holds is
refused unless `replace`; a failure leaves the store as it was."""

from __future__ import annotations

from fragility_tui.errors import InputError
from fragility_tui.store.grid_configs import declare_axes
from fragility_tui.store.schema import forget_derived


IMPORT_MEMORY = "256MB"  # DuckDB's share while a big log goes in (it spills beyond it)
CELL_BATCH = 200_000  # cells converted to Arrow and inserted at a time


def write_log_import(store, grid: str, planned, items, *, replace: bool = False) -> int:
    """Returns the number of cells written. Each planned run's columns are dropped once
    written (a million-sample log is never held twice)."""
    with store.connect(write=True) as con:
        limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        con.execute(f"SET memory_limit = '{IMPORT_MEMORY}'")
        try:
            return _write(store, con, grid, planned, items, replace)
        finally:
            con.execute(f"SET memory_limit = '{limit}'")


def _write(store, con, grid, planned, items, replace) -> int:
    _refuse_existing(con, grid, planned, replace)
    store.create_grid(grid, description="imported from other harnesses' logs", con=con)
    store.add_items(grid, items, con=con)
    written = 0
    for p in planned:
        if replace:
            con.execute("DELETE FROM cells WHERE grid = ? AND model = ? AND config_id = ?",
                        [grid, p.model, p.config_id])
        if not con.execute("SELECT 1 FROM models WHERE grid = ? AND model = ?",
                           [grid, p.model]).fetchall():  # a model of the grid keeps its row
            store.upsert_model(grid, p.model, source=f"import:{p.run.harness}",
                               provenance={**p.run.provenance,
                                           "imported_from": p.run.source}, con=con)
        declare_axes(con, grid, {p.config_id: p.axes}, p.run.source, replace=replace)
        for at in range(0, p.n_cells, CELL_BATCH):  # bounded memory for a million cells
            written += _insert(con, _table(grid, p, at, at + CELL_BATCH))
        p.release()
    forget_derived(con, [grid])
    store.cache_cube(grid, con)
    return written


def _insert(con, table) -> int:
    """Insert a planned run's cells as they are: the (model, config) has no cells in the
    grid (refused or deleted above) and the plan holds each item once, so none of the
    generic writer's de-duplication against the whole cells table is needed."""
    from fragility_tui.store.connection import relational

    relational(con).register("_log_cells", table)
    try:
        con.execute("""
            INSERT INTO cells (grid, model, item_uid, config_id, correct, pred, permutation,
                               raw_output, scores, tokens, ms, run_id, prompt)
            SELECT grid, model, item_uid, config_id, correct, pred, permutation, raw_output,
                   scores, tokens, ms, run_id, prompt FROM _log_cells""")
    finally:
        con.unregister("_log_cells")
    return table.num_rows


def _refuse_existing(con, grid, planned, replace: bool) -> None:
    if replace:
        return
    for p in planned:
        n = con.execute("SELECT count(*) FROM cells WHERE grid = ? AND model = ? AND "
                        "config_id = ?", [grid, p.model, p.config_id]).fetchall()[0][0]
        if n:
            raise InputError(f"grid {grid!r} already has {n} cells of model {p.model!r} under "
                             f"{p.config_id} (from {p.run.source}); pass --replace to "
                             "replace them", field="--grid")


def _table(grid: str, p, start: int, stop: int):
    """Cells start:stop of a planned run as an Arrow table in the cells' schema (plus
    prompt)."""
    import pyarrow as pa

    from fragility_tui.store.schema import cell_schema

    cols = {k: v[start:stop] for k, v in p.columns.items()}
    n = len(cols["item_uid"])
    table = pa.table({
        "grid": pa.array([grid] * n, pa.string()), "model": pa.array([p.model] * n, pa.string()),
        "item_uid": pa.array(cols["item_uid"], pa.string()),
        "config_id": pa.array([p.config_id] * n, pa.string()),
        "correct": pa.array(cols["correct"], pa.bool_()),
        "pred": pa.array(cols["pred"], pa.int8()),
        "permutation": pa.array(cols["permutation"], pa.string()),
        "raw_output": pa.array(cols["raw_output"], pa.string()),
        "scores": pa.array(cols["scores"], pa.list_(pa.float64())),
        "tokens": pa.nulls(n, pa.int32()), "ms": pa.nulls(n, pa.float32()),
        "run_id": pa.nulls(n, pa.string())}, schema=cell_schema())
    return table.append_column("prompt", pa.array(cols["prompt"], pa.string()))
