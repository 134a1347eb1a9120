"""Write planned log imports (imports/pipeline.py) into a grid, in one transaction: the
grid (created if absent), the items the logs need, each model with the log's provenance,
each imported config's axes, and the cells. A (model, config) the grid already holds is
refused unless `replace`; a failure leaves the store as it was."""

from __future__ import annotations

from fragility_tui.errors import InputError
from fragility_tui.store.grid_configs import declare_axes
from fragility_tui.store.schema import CellRow, cell_table, forget_derived


def write_log_import(store, grid: str, planned, items, *, replace: bool = False) -> int:
    """Returns the number of cells written."""
    with store.connect(write=True) as con:
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
            rows = [CellRow(**cell) for cell in p.cells]
            written += store.write_cell_table(cell_table(grid, rows), con)
        forget_derived(con, [grid])
        store.cache_cube(grid, con)
        return written


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
