"""Write planned log imports (imports/pipeline.py) into a grid, in one transaction: the
grid (created if absent), the items the logs need, each model with the log's provenance,
each imported config's axes, and the cells, a chunk at a time. A (model, config) the grid
already holds is refused unless `replace`; a failure leaves the store as it was."""

from __future__ import annotations

import contextlib
import json
import os

from fragility_tui.errors import InputError
from fragility_tui.store.connection import memory_limit
from fragility_tui.store.grid_configs import declare_axes
from fragility_tui.store.schema import forget_derived, utc_now
from fragility_tui.store.writer import refuse_synthetic
from fragility_tui.text import clean


IMPORT_MEMORY = "256MB"  # DuckDB's share while a big log goes in (it spills beyond it)
CELL_BATCH = 200_000  # cells converted to Arrow and inserted at a time


class LogWriter:
    """One transaction for a whole import: items and cells are written a chunk at a time
    as a log streams; a (model, config) is checked (refused, or replaced) the first time
    it comes; `finish` packs the grid's cube. Leaving the block on an error writes
    nothing."""

    def __init__(self, store, grid: str, *, replace: bool = False):
        self.store, self.grid, self.replace = store, grid, replace
        self.started: set[tuple[str, str]] = set()
        self.items: set[str] = set()
        self.written = 0

    def __enter__(self):
        with contextlib.ExitStack() as stack:  # a failure here closes what it opened
            self.con = stack.enter_context(self.store.connect(write=True))
            stack.enter_context(memory_limit(self.con, IMPORT_MEMORY))
            refuse_synthetic(self.con, self.grid)
            self.store.create_grid(self.grid, description="imported from other harnesses' "
                                   "logs", con=self.con)
            self.items = {r[0] for r in self.con.execute(
                "SELECT item_uid FROM items WHERE grid = ?", [self.grid]).fetchall()}
            self._opened = stack.pop_all()
        return self

    def __exit__(self, *exc):
        return self._opened.__exit__(*exc)

    def add_items(self, items) -> None:
        new = [it for it in items if it.item_uid not in self.items]
        if new:
            self.store.add_items(self.grid, new, con=self.con, existing=self.items)
            self.items.update(it.item_uid for it in new)

    def write(self, chunk) -> None:
        config = chunk.config
        key = (config.model, config.config_id)
        if key not in self.started:
            self._start(config)
            self.started.add(key)
        for at in range(0, chunk.n_cells, CELL_BATCH):  # bounded memory for a million cells
            self.written += _insert(self.con, _table(self.grid, config, chunk.columns,
                                                     at, at + CELL_BATCH))

    def _start(self, config) -> None:
        con, grid = self.con, self.grid
        n = con.execute("SELECT count(*) FROM cells WHERE grid = ? AND model = ? AND "
                        "config_id = ?", [grid, config.model, config.config_id]).fetchall()[0][0]
        if n and not self.replace:
            raise InputError(f"grid {grid!r} already has {n} cells of model {config.model!r} "
                             f"under {config.config_id} ({_earlier(con, grid, config)}); pass "
                             f"--replace to replace them with {config.run.source}'s",
                             field="--grid")
        if n:
            con.execute("DELETE FROM cells WHERE grid = ? AND model = ? AND config_id = ?",
                        [grid, config.model, config.config_id])
        source = os.path.abspath(config.run.source)
        _record_import(con, grid, config, source, self.store)
        declare_axes(con, grid, {config.config_id: config.axes}, source, replace=self.replace)

    def finish(self) -> int:
        forget_derived(self.con, [self.grid])
        self.store.cache_cube(self.grid, self.con)
        return self.written


def _earlier(con, grid: str, config) -> str:
    """Where the (model, config)'s cells in the grid came from, as recorded."""
    rows = con.execute("SELECT provenance FROM models WHERE grid = ? AND model = ?",
                       [grid, config.model]).fetchall()
    imports = json.loads(rows[0][0] or "{}").get("imports") or [] if rows else []
    entry = next((e for e in imports if e.get("config") == config.config_id), None)
    if entry is None:
        return "from an earlier run or import"
    # the store's text reaches a terminal: sanitised (a path may hold control characters)
    return clean(f"imported from {entry.get('imported_from')} on {entry.get('imported_at')}",
                 one_line=True, limit=400)


def _record_import(con, grid: str, config, source: str, store) -> None:
    """The model's row records each config's log under provenance `imports` (the file, the
    harness, when, the log's own provenance), a replaced config's entry replaced: the row
    itself is the model's first (a model of the grid keeps its source and settings)."""
    run = config.run
    entry = {"config": config.config_id, "harness": run.harness, "imported_from": source,
             "imported_at": utc_now().isoformat(timespec="seconds"), "log": run.provenance}
    rows = con.execute("SELECT provenance FROM models WHERE grid = ? AND model = ?",
                       [grid, config.model]).fetchall()
    if not rows:
        store.upsert_model(grid, config.model, source=f"import:{run.harness}",
                           provenance={**run.provenance, "imported_from": source,
                                       "imports": [entry]}, con=con)
        return
    provenance = json.loads(rows[0][0] or "{}")
    provenance["imports"] = [e for e in provenance.get("imports") or []
                             if e.get("config") != config.config_id] + [entry]
    con.execute("UPDATE models SET provenance = ? WHERE grid = ? AND model = ?",
                [json.dumps(provenance, sort_keys=True, default=str), grid, config.model])


def _insert(con, table) -> int:
    """Insert a planned run's cells as they are: the (model, config) has no cells in the
    grid (refused or deleted above) and the plan holds each item once, so none of the
    generic writer's de-duplication against the whole cells table is needed."""
    import pyarrow as pa

    from fragility_tui.store.connection import relational

    # a stream, not the table: DuckDB keeps a registered table's buffers until the
    # transaction commits (a million-sample import held every cell twice), a stream's not
    rows = table.num_rows
    relational(con).register("_log_cells", pa.RecordBatchReader.from_batches(
        table.schema, table.to_batches()))
    del table
    try:
        con.execute("""
            INSERT INTO cells (grid, model, item_uid, config_id, correct, pred, permutation,
                               raw_output, scores, tokens, ms, run_id, prompt)
            SELECT grid, model, item_uid, config_id, correct, pred, permutation, raw_output,
                   scores, tokens, ms, run_id, prompt FROM _log_cells""")
    finally:
        con.unregister("_log_cells")
    return rows


def _table(grid: str, config, columns: dict, start: int, stop: int):
    """Cells start:stop of a planned chunk as an Arrow table in the cells' schema (plus
    prompt)."""
    import pyarrow as pa

    from fragility_tui.store.schema import cell_schema

    p = config
    cols = {k: v[start:stop] for k, v in columns.items()}
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
