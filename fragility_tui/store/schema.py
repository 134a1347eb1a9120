"""The store's schema: tables, migrations, and the records that go in and out.

Every table is declared here, the caches' too: the modules that read and write a table
(cube_cache.py, calibration_cache.py, runs.py, …) import the schema, never the reverse."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

SCHEMA_VERSION = 10

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS configs (
    config_id VARCHAR PRIMARY KEY, position INTEGER, "order" VARCHAR, format VARCHAR,
    scoring VARCHAR, is_reference BOOLEAN);
CREATE TABLE IF NOT EXISTS grids (
    name VARCHAR PRIMARY KEY, synthetic BOOLEAN NOT NULL, description VARCHAR,
    created_at TIMESTAMP, seed BIGINT, item_set_hash VARCHAR, meta VARCHAR);
CREATE TABLE IF NOT EXISTS items (
    grid VARCHAR NOT NULL, item_uid VARCHAR NOT NULL, position INTEGER NOT NULL,
    benchmark VARCHAR NOT NULL, subject VARCHAR, question VARCHAR, choices VARCHAR[],
    gold INTEGER, PRIMARY KEY (grid, item_uid));
CREATE TABLE IF NOT EXISTS models (
    grid VARCHAR NOT NULL, model VARCHAR NOT NULL, source VARCHAR, revision VARCHAR,
    dtype VARCHAR, quantization VARCHAR, base_model VARCHAR, provenance VARCHAR,
    PRIMARY KEY (grid, model));
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, grid VARCHAR, model VARCHAR, status VARCHAR, pid INTEGER,
    created_at TIMESTAMP, started_at TIMESTAMP, ended_at TIMESTAMP, spec VARCHAR,
    provenance VARCHAR, events_path VARCHAR, cells_total BIGINT, cells_done BIGINT,
    tokens BIGINT, seconds DOUBLE, error VARCHAR);
CREATE TABLE IF NOT EXISTS cells (
    grid VARCHAR NOT NULL, model VARCHAR NOT NULL, item_uid VARCHAR NOT NULL,
    config_id VARCHAR NOT NULL, correct BOOLEAN NOT NULL, pred TINYINT,
    permutation VARCHAR, raw_output VARCHAR, scores DOUBLE[], tokens INTEGER, ms REAL,
    run_id VARCHAR);
"""

# A grid's dense cube, packed (cube_cache.py): derived from its cells, deleted when they change.
CUBE_CACHE_TABLE = """CREATE TABLE IF NOT EXISTS cube_cache (
    grid VARCHAR PRIMARY KEY, created_at TIMESTAMP, n_cells BIGINT, n_items BIGINT,
    models VARCHAR, configs VARCHAR, shape VARCHAR, bits BLOB, present BLOB)"""

# Verdict calibrations of a grid's pairs (calibration_cache.py), keyed by a content digest.
CALIBRATION_CACHE_TABLE = """CREATE TABLE IF NOT EXISTS calibration_cache (
    grid VARCHAR NOT NULL, key VARCHAR NOT NULL, a VARCHAR NOT NULL, b VARCHAR NOT NULL,
    created_at TIMESTAMP, result VARCHAR, PRIMARY KEY (grid, key, a, b))"""

# The axes stated for a grid's configs (SPEC v5 §2b) whose ids do not say them all: configs
# imported from another harness's log and free-form long-format ids (store/grid_configs.py).
# A runner config's id states its axes; it needs no row.
GRID_CONFIGS_TABLE = """CREATE TABLE IF NOT EXISTS grid_configs (
    grid VARCHAR NOT NULL, config_id VARCHAR NOT NULL, axes VARCHAR NOT NULL,
    source VARCHAR, PRIMARY KEY (grid, config_id))"""

# The first sequential comparison of each (pair, reference, target) in a grid, with its seed
# and verdict (store/comparisons.py, issue 58): a later one with another seed or reference
# is a replay of the same cells, not independent evidence. Not derived: kept as cells change.
COMPARISONS_TABLE = """CREATE TABLE IF NOT EXISTS comparisons (
    grid VARCHAR NOT NULL, model_1 VARCHAR NOT NULL, model_2 VARCHAR NOT NULL,
    reference VARCHAR NOT NULL, target VARCHAR NOT NULL, a VARCHAR NOT NULL,
    b VARCHAR NOT NULL, seed BIGINT NOT NULL, scope VARCHAR, margin DOUBLE, chunk INTEGER,
    live BOOLEAN, created_at TIMESTAMP, updated_at TIMESTAMP, result VARCHAR,
    PRIMARY KEY (grid, model_1, model_2, reference, target))"""

# The tables derived from a grid's cells and items: the transaction that changes those
# deletes the grid's rows here (forget_derived), so no reader is served a stale one.
DERIVED_TABLES = ("cube_cache", "calibration_cache")

# Each entry upgrades the schema from version i+1 to i+2; append, never edit.
MIGRATIONS: list[str] = [
    # 2: a run's process is identified by pid and start time (a reused pid is not the run)
    "ALTER TABLE runs ADD COLUMN pid_started VARCHAR",
    # 3: a model's fingerprint (every setting that can change a cell; NULL until a run of
    # this version fills it) and each cell's prompt token hash
    "ALTER TABLE models ADD COLUMN fingerprint VARCHAR; "
    "ALTER TABLE cells ADD COLUMN prompt_sha VARCHAR",
    # 4: a grid's dense cube, packed, so a big grid opens without joining every cell
    CUBE_CACHE_TABLE,
    # 5: verdict calibrations of a grid's pairs (store/calibration_cache.py), one row a pair
    CALIBRATION_CACHE_TABLE,
    # 6: the device a run holds (or waits for) and a note on what it waits for (queued)
    "ALTER TABLE runs ADD COLUMN device VARCHAR; ALTER TABLE runs ADD COLUMN note VARCHAR",
    # 7: how close each cell's decision was (runner docs: margin, near_tie); NULL in cells
    # written before, by imports and by simulations
    "ALTER TABLE cells ADD COLUMN margin DOUBLE; "
    "ALTER TABLE cells ADD COLUMN near_tie BOOLEAN",
    # 8: configs as data (SPEC v5): the axes stated for a grid's configs (the old grids'
    # configs are all runner ids, whose axes their ids state), and the prompt another
    # harness's log shows for a cell (NULL in our runner's cells: it re-renders its own)
    GRID_CONFIGS_TABLE + "; ALTER TABLE cells ADD COLUMN IF NOT EXISTS prompt VARCHAR",
    # 9: the first sequential comparison of each (pair, reference, target) in a grid, with
    # its seed and verdict (store/comparisons.py): later seeds or references replay it
    COMPARISONS_TABLE,
    # 10: the solved examples a +kN cell was shown (their item uids, in order), so it
    # re-renders exactly (SPEC v5 §2); NULL for every other cell
    "ALTER TABLE cells ADD COLUMN IF NOT EXISTS examples VARCHAR[]",
]

RUN_FIELDS = ("grid", "model", "status", "pid", "pid_started", "created_at", "started_at", "ended_at", "spec",
              "provenance", "events_path", "cells_total", "cells_done", "tokens", "seconds",
              "error", "device", "note")
JSON_RUN_FIELDS = ("spec", "provenance")
CELL_COLUMNS = ("model", "item_uid", "config_id", "correct", "pred", "permutation",
                "raw_output", "scores", "tokens", "ms", "run_id")


@dataclass(frozen=True)
class CellRow:
    model: str
    item_uid: str
    config_id: str
    correct: bool
    pred: int | None = None  # native option index; -1 = unparsed
    permutation: str | None = None  # e.g. "2013": display position j shows choice int(p[j])
    raw_output: str | None = None
    scores: list[float] | None = None  # raw log-likelihoods, native order (likelihood configs)
    tokens: int | None = None
    ms: float | None = None
    run_id: str | None = None
    prompt_sha: str | None = None  # sha256 of the prompt token ids the model read
    # Generation: the smallest top-1 minus top-2 log-probability gap over the steps up to
    # the one that decided the parse; likelihood: best minus second acc_norm score.
    margin: float | None = None
    near_tie: bool | None = None  # margin within the run's rounding tolerance for its dtype
    prompt: str | None = None  # the prompt an imported log shows (capped), else None
    examples: list[str] | None = None  # +kN: the solved examples' item uids, as shown


@dataclass(frozen=True)
class GridInfo:
    name: str
    synthetic: bool
    description: str
    models: int
    items: int
    configs: int
    cells: int
    created_at: str | None

    @property
    def complete(self) -> bool:
        return self.cells > 0 and self.cells == self.models * self.items * self.configs

    def to_json(self) -> dict:
        return {"name": self.name, "models": self.models, "items": self.items,
                "configs": self.configs, "cells": self.cells, "complete": self.complete,
                "synthetic": self.synthetic, "description": self.description,
                "created_at": self.created_at}


def forget_derived(con, grids) -> None:
    """Delete what is derived from these grids (DERIVED_TABLES), inside the caller's
    transaction that adds cells or items to them."""
    grids = list(grids)
    if grids:
        marks = ", ".join("?" * len(grids))
        for table in DERIVED_TABLES:
            con.execute(f"DELETE FROM {table} WHERE grid IN ({marks})", grids)


def utc_now() -> datetime:
    """Now, in UTC, without a zone (how the store's TIMESTAMP columns hold times)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def cell_schema():
    """The Arrow schema of a cells batch (grid + CELL_COLUMNS)."""
    import pyarrow as pa

    return pa.schema([
        ("grid", pa.string()), ("model", pa.string()), ("item_uid", pa.string()),
        ("config_id", pa.string()), ("correct", pa.bool_()), ("pred", pa.int8()),
        ("permutation", pa.string()), ("raw_output", pa.string()),
        ("scores", pa.list_(pa.float64())), ("tokens", pa.int32()), ("ms", pa.float32()),
        ("run_id", pa.string()),
    ])


def cell_table(grid: str, rows: list[CellRow]):
    """CellRows of one grid as an Arrow table in cell_schema()."""
    import pyarrow as pa

    columns = {"grid": [grid] * len(rows)}
    for name in CELL_COLUMNS:
        columns[name] = [getattr(r, name) for r in rows]
    table = pa.table(columns, schema=cell_schema())
    # Optional in a cells batch (imports and simulations have none): see write_cell_table.
    table = table.append_column("prompt_sha", pa.array([r.prompt_sha for r in rows], pa.string()))
    table = table.append_column("margin", pa.array([r.margin for r in rows], pa.float64()))
    table = table.append_column("near_tie", pa.array([r.near_tie for r in rows], pa.bool_()))
    if any(r.prompt is not None for r in rows):
        table = table.append_column("prompt", pa.array([r.prompt for r in rows], pa.string()))
    if any(r.examples for r in rows):
        table = table.append_column("examples", pa.array([r.examples for r in rows],
                                                         pa.list_(pa.string())))
    return table
