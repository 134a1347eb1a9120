"""The embedded DuckDB store: grids, items, configs, models, runs and cells.

Concurrency design (see docs/architecture.md). DuckDB lets one process hold a database file
read-write at a time, and a read-write holder excludes readers in other processes. So no
process keeps the file open: every operation opens a connection, runs one transaction and
closes it, retrying with jittered back-off while another process holds the lock. Writers
batch (a run commits a small batch of cells per transaction), readers copy what they need
into memory (the analysis cube) and let go. An evaluation run, the TUI, a `report` in
another shell and a second run therefore interleave at transaction granularity instead of
locking each other out. Atomicity comes from DuckDB's transactions and WAL: a kill -9 at any
moment loses at most the in-flight transaction, and `cells` is keyed by (grid, model, item,
config) so re-written cells are ignored, never duplicated.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from fragility_tui import settings
from fragility_tui.errors import InputError
from fragility_tui.harness.configs import CONFIGS
from fragility_tui.store import cube_cache
from fragility_tui.store.calibration_cache import CalibrationRecords
from fragility_tui.store.comparisons import ComparisonRecords
from fragility_tui.store.grid_configs import POSITIONS_SQL, grid_config_ids, stated_axes
from fragility_tui.store.cell_figures import CellFigures
from fragility_tui.store.connection import (StoreReadOnly, duckdb, is_read_only_error,
                                            open_duckdb, relational, stored_version)
from fragility_tui.grid.cube import Cube
from fragility_tui.items.item import Item
from fragility_tui.store.models import ModelRecords
from fragility_tui.store.run_table import RunRecords
from fragility_tui.store.schema import (DERIVED_TABLES, MIGRATIONS, SCHEMA_V1,
                                        SCHEMA_VERSION, CellRow, GridInfo, cell_table,
                                        forget_derived, utc_now)

APP_NAME = settings.APP_NAME
LOCK_WAIT_S = settings.lock_wait_s()  # read once, at import, as the default of Store()


def default_db_path() -> Path:
    return settings.data_dir() / "fragility.duckdb"


ITEM_BATCH = 50_000  # items converted to Arrow and inserted at a time


class Store(ModelRecords, RunRecords, CalibrationRecords, CellFigures, ComparisonRecords):
    """A DuckDB file opened per operation (see the module docstring for why)."""

    # One DuckDB database may be open only once per process with one configuration;
    # serialise this process's own connections to a path.
    _process_locks: dict[str, threading.RLock] = {}

    def __init__(self, path: str | os.PathLike | None = None, *, lock_wait_s: float = LOCK_WAIT_S,
                 session: bool = False):
        """session=True: the schema check's connection stays open for the first session()."""
        self.path = Path(path) if path is not None else default_db_path()
        self.lock_wait_s = lock_wait_s
        self.read_only: str | None = None  # why the file cannot be written, once known
        key = str(self.path.resolve())
        self._lock = Store._process_locks.setdefault(key, threading.RLock())
        self._in_session = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._session: duckdb.DuckDBPyConnection | None = self._open() if session else None
        try:
            self._ensure_schema()
        except BaseException:
            if self._session is not None:
                self._session.close()
            raise

    # -- connections ---------------------------------------------------------------------

    @contextmanager
    def session(self):
        """Every connect() inside shares one connection, opened by the first and closed on
        exit (`report` opens the file once; ~20 ms an open). Only around reads and short
        writes: other processes wait meanwhile. Nested sessions share the outer one."""
        with self._lock:
            if self._in_session:
                yield self
                return
            self._in_session = True
            try:
                yield self
            finally:
                con, self._session, self._in_session = self._session, None, False
                if con is not None:
                    con.close()

    @contextmanager
    def connect(self, write: bool = False):
        """A short-lived connection (the session's, inside session()); a write
        connection runs in one transaction."""
        with self._lock:
            if self._in_session and self._session is None:
                self._session = self._open()
            shared = self._session
            con = shared if shared is not None else self._open()
            try:
                if write:
                    if self.read_only:
                        raise StoreReadOnly(f"cannot write to the store: {self.read_only}")
                    con.execute("BEGIN TRANSACTION")
                    try:
                        yield con
                    except BaseException:
                        con.execute("ROLLBACK")
                        raise
                    con.execute("COMMIT")
                else:
                    yield con
            finally:
                if shared is None:
                    con.close()

    def _in_transaction(self, con, work):
        """Run work(con) inside the caller's transaction, or in a new one of its own."""
        if con is not None:
            return work(con)
        with self.connect(write=True) as c:
            return work(c)

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self.read_only is None:
            try:
                return open_duckdb(self.path, read_only=False, wait_s=self.lock_wait_s)
            except duckdb.IOException as exc:  # a read-only mount or file: reads still work
                if not (is_read_only_error(exc) and self.path.exists()):
                    raise
                self.read_only = f"{self.path} cannot be written ({exc})"
        return open_duckdb(self.path, read_only=True, wait_s=self.lock_wait_s)

    def _ensure_schema(self) -> None:
        try:
            if self.schema_version() != SCHEMA_VERSION:  # one read, not the DDL (~5 ms an open)
                self._create_or_migrate()
        except StoreReadOnly:
            version = self.schema_version()
            if version is not None and version > SCHEMA_VERSION:  # not "cannot write"
                raise InputError(f"store schema version {version} is newer than this "
                                 f"fragility-tui ({SCHEMA_VERSION}); upgrade fragility-tui",
                                 path=str(self.path)) from None
            if version != SCHEMA_VERSION:  # readable only as it is
                raise

    def _create_or_migrate(self) -> None:
        with self.connect(write=True) as con:
            con.execute(SCHEMA_V1)
            version = stored_version(con)
            if version is None:  # a new store: version 1's tables, then the migrations
                con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
                con.executemany(
                    "INSERT OR IGNORE INTO configs VALUES (?, ?, ?, ?, ?, ?)",
                    [[c.config_id, i, c.order, c.format, c.scoring, c.is_reference]
                     for i, c in enumerate(CONFIGS)])
                version = 1
            if version == SCHEMA_VERSION:
                return
            if version > SCHEMA_VERSION:
                raise InputError(f"store schema version {version} is newer than this "
                                 f"fragility-tui ({SCHEMA_VERSION}); upgrade fragility-tui",
                                 path=str(self.path))
            for step in MIGRATIONS[version - 1:]:
                con.execute(step)
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                        [str(SCHEMA_VERSION)])

    def schema_version(self) -> int | None:
        with self.connect() as con:
            return stored_version(con)

    # -- grids ---------------------------------------------------------------------------

    def list_grids(self) -> list[GridInfo]:
        with self.connect() as con:
            rows = con.execute("""
                WITH c AS (SELECT grid, count(*) AS cells, count(DISTINCT model) AS models,
                                  count(DISTINCT config_id) AS configs
                           FROM cells GROUP BY grid),
                     i AS (SELECT grid, count(*) AS items FROM items GROUP BY grid),
                     m AS (SELECT grid, count(*) AS models FROM models GROUP BY grid)
                SELECT g.name, g.synthetic, coalesce(g.description, ''),
                       greatest(coalesce(c.models, 0), coalesce(m.models, 0)),
                       coalesce(i.items, 0), coalesce(c.configs, 0), coalesce(c.cells, 0),
                       CAST(g.created_at AS VARCHAR)
                FROM grids g LEFT JOIN c ON c.grid = g.name LEFT JOIN i ON i.grid = g.name
                LEFT JOIN m ON m.grid = g.name ORDER BY g.created_at, g.name""").fetchall()
        return [GridInfo(*r) for r in rows]

    def grid_info(self, name: str) -> GridInfo:
        for info in self.list_grids():
            if info.name == name:
                return info
        raise InputError(f"no grid named {name!r} in {self.path}"
                         + self._known_grids_hint())

    def _known_grids_hint(self) -> str:
        names = [g.name for g in self.list_grids()]
        return f" (grids: {', '.join(names)})" if names else " (the store has no grids)"

    def has_grid(self, name: str) -> bool:
        with self.connect() as con:
            return con.execute("SELECT 1 FROM grids WHERE name = ?", [name]).fetchall() != []

    def grid_meta(self, name: str) -> dict:
        with self.connect() as con:
            row = con.execute("SELECT synthetic, description, seed, item_set_hash, meta FROM grids "
                              "WHERE name = ?", [name]).fetchall()
            row = row[0] if row else None
        if row is None:
            raise InputError(f"no grid named {name!r} in {self.path}" + self._known_grids_hint())
        return {"synthetic": row[0], "description": row[1], "seed": row[2],
                "item_set_hash": row[3], **json.loads(row[4] or "{}")}

    def create_grid(self, name: str, *, synthetic: bool = False, description: str = "",
                    seed: int = 0, item_set_hash: str | None = None, meta: dict | None = None,
                    con: duckdb.DuckDBPyConnection | None = None) -> None:
        """Create a grid row if absent (an existing grid keeps its settings)."""
        if not name or not name.strip():
            raise InputError("a grid name must not be empty", field="--grid")
        args = [name, synthetic, description, utc_now(), seed, item_set_hash,
                json.dumps(meta or {})]
        self._in_transaction(con, lambda c: c.execute(
            "INSERT OR IGNORE INTO grids VALUES (?, ?, ?, ?, ?, ?, ?)", args))

    def claim_grid(self, name: str, items: list[Item], *, positions: list[int] | None,
                   seed: int, set_hash: str, description: str, meta: dict | None,
                   check) -> int:
        """Check the grid, create it if absent and add the run's items, in one transaction
        (store/grid_claim.py); `check(settings or None)` raises to refuse."""
        from fragility_tui.store.grid_claim import claim_grid

        return self._in_transaction(None, lambda c: claim_grid(
            self, c, name, items, positions=positions, seed=seed, set_hash=set_hash,
            description=description, meta=meta, check=check))

    def delete_grid(self, name: str, con: duckdb.DuckDBPyConnection | None = None) -> None:
        def run(c):
            for table, column in (("cells", "grid"), ("items", "grid"), ("models", "grid"),
                                  ("grid_configs", "grid"), ("comparisons", "grid"),
                                  *((t, "grid") for t in DERIVED_TABLES), ("grids", "name")):
                c.execute(f"DELETE FROM {table} WHERE {column} = ?", [name])

        self._in_transaction(con, run)

    # -- items ---------------------------------------------------------------------------

    def add_items(self, grid: str, items: list[Item],
                  con: duckdb.DuckDBPyConnection | None = None,
                  positions: list[int] | None = None, existing: set[str] | None = None) -> int:
        """Insert items not yet in the grid (by item_uid), after the existing ones, in the
        order given. (`positions`, each item's place in a whole sampled set, is what parts
        record for a later merge, store/parts.py; the store keeps its own order.)"""
        if con is None:
            return self._in_transaction(None, lambda c: self.add_items(grid, items, con=c))
        if existing is None:  # a streamed import keeps its own (no re-read per chunk)
            existing = {r[0] for r in con.execute("SELECT item_uid FROM items WHERE grid = ?",
                                                  [grid]).fetchall()}
        start = con.execute("SELECT coalesce(max(position) + 1, 0) FROM items WHERE grid = ?",
                            [grid]).fetchall()[0][0]
        new = [it for it in {it.item_uid: it for it in items}.values()
               if it.item_uid not in existing]
        if not new:
            return 0
        import pyarrow as pa

        for at in range(0, len(new), ITEM_BATCH):  # bounded memory for a million items
            part = new[at:at + ITEM_BATCH]
            table = pa.table({
                "grid": [grid] * len(part),
                "item_uid": [it.item_uid for it in part],
                "position": list(range(start + at, start + at + len(part))),
                "benchmark": [it.benchmark for it in part],
                "subject": [it.subject for it in part],
                "question": [it.question for it in part],
                "choices": [list(it.choices) if it.choices else None for it in part],
                "gold": [it.gold for it in part],
            })
            relational(con).register("_new_items", pa.RecordBatchReader.from_batches(
                table.schema, table.to_batches()))  # a table's buffers stay to the commit
            con.execute("INSERT INTO items SELECT * FROM _new_items")
            con.unregister("_new_items")
        forget_derived(con, [grid])
        return len(new)

    def load_items(self, grid: str) -> list[Item]:
        with self.connect() as con:
            rows = con.execute("SELECT item_uid, benchmark, subject, question, choices, gold "
                               "FROM items WHERE grid = ? ORDER BY position", [grid]).fetchall()
        return [Item(u, b, s, q or "", tuple(c or ()), -1 if g is None else g)
                for u, b, s, q, c, g in rows]

    def get_item(self, grid: str, item_uid: str) -> Item | None:
        with self.connect() as con:
            row = con.execute("SELECT item_uid, benchmark, subject, question, choices, gold "
                              "FROM items WHERE grid = ? AND item_uid = ?",
                              [grid, item_uid]).fetchall()
            row = row[0] if row else None
        if row is None:
            return None
        u, b, s, q, c, g = row
        return Item(u, b, s, q or "", tuple(c or ()), -1 if g is None else g)

    # -- cells ---------------------------------------------------------------------------

    def write_cells(self, grid: str, rows: list[CellRow],
                    con: duckdb.DuckDBPyConnection | None = None) -> int:
        """Insert cells in one transaction; cells already present are kept. Returns the
        number of new cells."""
        if not rows:
            return 0
        if con is None:
            return self._in_transaction(None, lambda c: self.write_cells(grid, rows, con=c))
        return self.write_cell_table(cell_table(grid, rows), con)

    @staticmethod
    def write_cell_table(table, con: duckdb.DuckDBPyConnection) -> int:
        """Insert an Arrow table with the cells columns (grid first); existing keys kept."""
        relational(con).register("_new_cells", table)
        try:
            before = con.execute("SELECT count(*) FROM cells").fetchall()[0][0]
            # Keyed on (grid, model, item, config) without an index: an ART index over
            # four strings made the file ~10x larger; the anti-join is a hash join.
            optional = ", ".join(f"n.{name}" if name in table.column_names else "NULL"
                                 for name in ("prompt_sha", "margin", "near_tie", "prompt",
                                              "examples"))
            con.execute(f"""
                INSERT INTO cells (grid, model, item_uid, config_id, correct, pred, permutation,
                                   raw_output, scores, tokens, ms, run_id, prompt_sha, margin,
                                   near_tie, prompt, examples)
                SELECT DISTINCT ON (n.grid, n.model, n.item_uid, n.config_id) n.grid, n.model,
                       n.item_uid, n.config_id, n.correct, n.pred, n.permutation, n.raw_output,
                       n.scores, n.tokens, n.ms, n.run_id, {optional}
                FROM _new_cells n ANTI JOIN cells c
                  ON c.grid = n.grid AND c.model = n.model AND c.item_uid = n.item_uid
                 AND c.config_id = n.config_id""")
            added = con.execute("SELECT count(*) FROM cells").fetchall()[0][0] - before
            if added:
                grids = [r[0] for r in con.execute("SELECT DISTINCT grid FROM _new_cells")
                         .fetchall()]
                forget_derived(con, grids)
            return added
        finally:
            con.unregister("_new_cells")

    def done_keys(self, grid: str, model: str) -> set[tuple[str, str]]:
        with self.connect() as con:
            rows = con.execute("SELECT item_uid, config_id FROM cells WHERE grid = ? AND model = ?",
                               [grid, model]).fetchall()
        return set(rows)

    def cells_of_run(self, grid: str, run_id: str) -> int:
        """How many of the grid's cells the run wrote (a merge's check that none was lost)."""
        with self.connect() as con:
            return con.execute("SELECT count(*) FROM cells WHERE grid = ? AND run_id = ?",
                               [grid, run_id]).fetchone()[0]

    def count_cells(self, grid: str | None = None) -> int:
        with self.connect() as con:
            if grid is None:
                return con.execute("SELECT count(*) FROM cells").fetchall()[0][0]
            return con.execute("SELECT count(*) FROM cells WHERE grid = ?", [grid]).fetchall()[0][0]

    def load_cube(self, grid: str) -> Cube:
        """The grid as a dense cube: models sorted by name, items in grid order, configs in
        canonical order restricted to those with at least one cell. Read from the packed
        copy kept in the store (store/cube_cache.py) when there is one, else built from the
        cells and packed for next time, in one transaction (so the copy matches the cells);
        a store that cannot be written (a read-only mount) builds it and keeps nothing."""
        try:
            return self._load_cube(grid, write=not self.read_only)
        except StoreReadOnly:  # found read-only on this very open
            return self._load_cube(grid, write=False)

    def _load_cube(self, grid: str, write: bool) -> Cube:
        with self.connect(write=write) as con:
            if con.execute("SELECT 1 FROM grids WHERE name = ?", [grid]).fetchall() == []:
                raise InputError(f"no grid named {grid!r} in {self.path}" + self._known_grids_hint())
            item_rows = con.execute("SELECT item_uid, benchmark, subject FROM items WHERE grid = ? "
                                    "ORDER BY position", [grid]).fetchall()
            cached = cube_cache.read(con, grid) or (self.cache_cube(grid, con) if write
                                                    else self.cube_from_cells(con, grid))
            axes = stated_axes(con, grid)
        models, configs, bits, present = cached
        return Cube(
            models=tuple(models),
            items=tuple(r[0] for r in item_rows),
            configs=tuple(configs),
            bits=bits,
            present=present,
            benchmarks=np.array([r[1] for r in item_rows], dtype=object),
            subjects=np.array([r[2] for r in item_rows], dtype=object),
            stated_axes=axes or None,
        )

    def cache_cube(self, grid: str, con: duckdb.DuckDBPyConnection) -> tuple:
        """Build the grid's cube from its cells and keep it packed (inside the caller's
        write transaction); returns (models, configs, bits, present)."""
        stamp = cube_cache.grid_stamp(con, grid)
        cube = self.cube_from_cells(con, grid)
        cube_cache.write(con, grid, stamp, *cube)
        return cube

    @staticmethod
    def cube_from_cells(con, grid: str) -> tuple:
        """(models, configs, bits, present) of a grid built from its cells, read inside the
        caller's connection (merge places new cells into this cube)."""
        models = [r[0] for r in con.execute(
            "SELECT DISTINCT model FROM cells WHERE grid = ? ORDER BY model", [grid]).fetchall()]
        n_items = con.execute("SELECT count(*) FROM items WHERE grid = ?", [grid]).fetchall()[0][0]
        configs = grid_config_ids(con, grid)
        shape = (len(models), n_items, len(configs))
        bits = np.zeros(shape, dtype=bool)
        present = np.zeros(shape, dtype=bool)
        # Streamed a batch at a time: a 52 M-cell grid's indices are never all in memory.
        cells = relational(con).sql(f"""
            WITH m AS (SELECT model, CAST(row_number() OVER (ORDER BY model) - 1 AS BIGINT) AS mi
                       FROM (SELECT DISTINCT model FROM cells WHERE grid = $g)),
                 i AS (SELECT item_uid, CAST(row_number() OVER (ORDER BY position) - 1 AS BIGINT) AS ii
                       FROM items WHERE grid = $g)
            SELECT (m.mi * {n_items} + i.ii) * {len(configs)} + f.position AS cell, c.correct
            FROM cells c JOIN m USING (model) JOIN i USING (item_uid)
            JOIN {POSITIONS_SQL} f USING (config_id) WHERE c.grid = $g""",
            params={"g": grid, "configs": configs})
        with cells.to_arrow_reader(batch_size=1 << 20) as reader:
            for batch in reader:
                flat = batch.column(0).to_numpy()
                present.reshape(-1)[flat] = True
                bits.reshape(-1)[flat[batch.column(1).to_numpy(zero_copy_only=False)]] = True
        return models, configs, bits, present
