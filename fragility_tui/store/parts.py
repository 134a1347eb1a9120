"""A store-less worker's output: a folder of Parquet parts (`run --out-parts DIR`).

A worker on a cluster node needs no DuckDB file: it writes what a run would write into the
store as plain files under DIR, and `fragility-tui merge` (store/merge.py) brings them into a
store later. Layout (several workers may share one DIR; no two write the same file):

    DIR/runs/RUN_ID.json          the run record: spec, status, counts, provenance, the grid's
                                  settings (seed, item-set hash) and each model's row
    DIR/items/RUN_ID.parquet      the items the run evaluated, with their sampled position
    DIR/cells/RUN_ID-NNNNNN.parquet
                                  one committed batch of cells, in `export --what cells`' schema
    DIR/events/RUN_ID.jsonl       progress events (as a store run writes them)

Every file is written under a temporary name starting with "." and renamed into place, so a
reader (merge, or a rerun) sees whole files only, and a worker killed at any moment loses at
most the batch in flight (its hidden temporary is removed when the next worker on that
host opens DIR). Re-running the same command skips the cells DIR's parts hold (resume =
rerun).

`PartsStore` implements `CellSink` (store/sink.py), the methods of `Store` that the run loop
calls, so the loop does not know which one it writes to.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.files import sweep_stale_temporaries, write_atomic
from fragility_tui.items.item import Item
from fragility_tui.store.models import FingerprintMismatch, fingerprint_diff
from fragility_tui.store.runs import RunRecord, RunStatus, new_run_id
from fragility_tui.store.schema import CellRow, utc_now

RUNS, ITEMS, CELLS, EVENTS = "runs", "items", "cells", "events"


def part_schema():
    """The columns of a cells part: those of `export --what cells` (store/store.py)."""
    import pyarrow as pa

    return pa.schema([
        ("model", pa.string()), ("item", pa.string()), ("benchmark", pa.string()),
        ("config", pa.string()), ("correct", pa.bool_()), ("pred", pa.int8()),
        ("raw_output", pa.string()), ("subject", pa.string()), ("permutation", pa.string()),
        ("scores", pa.list_(pa.float64())), ("tokens", pa.int32()), ("ms", pa.float32()),
        ("run_id", pa.string()), ("prompt_sha", pa.string()), ("margin", pa.float64()),
        ("near_tie", pa.bool_()), ("examples", pa.list_(pa.string())),
    ])


def item_schema():
    import pyarrow as pa

    return pa.schema([
        ("item_uid", pa.string()), ("position", pa.int64()), ("benchmark", pa.string()),
        ("subject", pa.string()), ("question", pa.string()), ("choices", pa.list_(pa.string())),
        ("gold", pa.int32()),
    ])


def _write_json(path: Path, doc: dict) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(
        json.dumps(doc, sort_keys=True, default=str, indent=1) + "\n"))


def read_json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", path=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    if not isinstance(doc, dict):
        raise InputError("a run record must be a JSON object", path=str(path))
    return doc


def visible_files(folder: Path, pattern: str) -> list[Path]:
    """Whole files only (temporary ones start with '.'), in name order."""
    return sorted(p for p in folder.glob(pattern) if not p.name.startswith("."))


class PartsStore:
    """The run loop's store, as files under one folder (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike):
        self.path = Path(folder)
        if self.path.exists() and not self.path.is_dir():
            raise InputError("--out-parts must be a folder", path=str(self.path))
        for sub in (RUNS, ITEMS, CELLS, EVENTS):
            (self.path / sub).mkdir(parents=True, exist_ok=True)
            sweep_stale_temporaries(self.path / sub)  # a killed worker's half-written file
        self._runs: dict[str, dict] = {}  # run files as JSON documents, by run_id
        self._items: dict[str, tuple[int, Item]] = {}  # this process's items, by uid
        self._held: set[tuple[str, str, str]] | None = None  # (model, item, config) in parts
        self._part_seq = 0

    # -- run records ---------------------------------------------------------------------

    def _run_path(self, run_id: str) -> Path:
        return self.path / RUNS / f"{run_id}.json"

    def create_run(self, run: dict) -> str:
        run_id = run.get("run_id") or new_run_id()
        doc = {**run, "run_id": run_id, "created_at": utc_now().isoformat(),
               "status": run.get("status") or RunStatus.QUEUED.value, "models": {}}
        self._runs[run_id] = doc
        _write_json(self._run_path(run_id), doc)
        return run_id

    def _doc(self, run_id: str) -> dict | None:
        """The run's file as written (with the models it recorded), cached."""
        if run_id in self._runs:
            return self._runs[run_id]
        path = self._run_path(run_id)
        if not path.is_file():
            return None
        self._runs[run_id] = read_json(path)
        return self._runs[run_id]

    def get_run(self, run_id: str) -> RunRecord | None:
        doc = self._doc(run_id)
        return None if doc is None else RunRecord.from_row(doc)

    def update_run(self, run_id: str, **fields) -> None:
        doc = self._doc(run_id)
        if doc is None:
            raise InputError(f"no run {run_id!r} in {self.path}", field="--resume")
        doc.update({k: v.isoformat() if hasattr(v, "isoformat") else v
                    for k, v in fields.items()})
        _write_json(self._run_path(run_id), doc)

    def events_path_for(self, run_id: str) -> Path:
        return self.path / EVENTS / f"{run_id}.jsonl"

    def slots_dir(self) -> None:
        """No device queue: a worker's GPUs are handed out by Ray or Slurm (CUDA_VISIBLE_
        DEVICES), and each worker writes its own folder."""
        return None

    def runs(self, grid: str | None = None) -> list[RunRecord]:
        """The folder's runs (of one grid), in file name order."""
        return [RunRecord.from_row(doc) for doc in self._docs()
                if grid is None or doc.get("grid") == grid]

    def _docs(self) -> list[dict]:
        return [read_json(p) for p in visible_files(self.path / RUNS, "*.json")]

    def _grid_runs(self, grid: str) -> list[dict]:
        return [r for r in self._docs() if r.get("grid") == grid]

    # -- the grid's settings ---------------------------------------------------------------

    def _settings(self, grid: str) -> dict | None:
        """Seed and item-set hash, as the earliest of the folder's runs of the grid records
        them in its provenance (each run records its own; merge checks they agree)."""
        for run in sorted(self._grid_runs(grid), key=lambda r: r.get("created_at") or ""):
            prov = run.get("provenance") or {}
            if prov.get("seed") is not None:
                return {"seed": prov["seed"], "item_set_hash": prov.get("item_set_hash")}
        return None

    def has_grid(self, grid: str) -> bool:
        return self._settings(grid) is not None

    def grid_meta(self, grid: str) -> dict:
        settings = self._settings(grid)
        if settings is None:
            raise InputError(f"no grid named {grid!r} in {self.path}")
        return settings

    def create_grid(self, grid: str, **settings) -> None:
        """Nothing to do: the run's provenance records the grid's settings, and merge
        creates the grid."""

    def claim_grid(self, grid: str, items: list[Item], *, positions: list[int] | None,
                   seed: int, set_hash: str, description: str, meta: dict | None,
                   check) -> int:
        """The grid's settings as the folder's runs record them, checked again when the run
        starts writing; merge checks the store's own grid (store/grid_claim.py)."""
        check(self._settings(grid))
        return self.add_items(grid, items, positions=positions)

    def add_items(self, grid: str, items: list[Item], positions: list[int] | None = None) -> int:
        """The run's items with their position in the sampled item set (so a merge of all
        shards orders the grid's items as one whole run would)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        positions = positions or list(range(len(items)))
        self._items.update({it.item_uid: (pos, it) for pos, it in zip(positions, items)})
        rows = sorted(self._items.values(), key=lambda pair: pair[0])
        table = pa.table({
            "item_uid": [it.item_uid for _, it in rows], "position": [p for p, _ in rows],
            "benchmark": [it.benchmark for _, it in rows],
            "subject": [it.subject for _, it in rows],
            "question": [it.question for _, it in rows],
            "choices": [list(it.choices) for _, it in rows],
            "gold": [it.gold for _, it in rows]}, schema=item_schema())
        for run_id, doc in self._runs.items():
            if doc.get("grid") == grid:
                write_atomic(self.path / ITEMS / f"{run_id}.parquet",
                             lambda tmp: pq.write_table(table, tmp))
        return len(items)

    # -- models ------------------------------------------------------------------------------

    def _recorded_models(self, grid: str, model: str) -> list[tuple[str, dict]]:
        return [(r["run_id"], r["models"][model]) for r in self._grid_runs(grid)
                if model in (r.get("models") or {})]

    def check_model(self, grid: str, model: str, fingerprint: dict) -> None:
        """Refuse a setting other than the one this folder's parts of the model were made
        with (the store's own row is checked again by merge)."""
        for _, row in self._recorded_models(grid, model):
            differences = fingerprint_diff(row.get("fingerprint"), fingerprint)
            if differences:
                raise FingerprintMismatch(grid, model, differences)

    def record_model(self, grid: str, model: str, *, fingerprint: dict, **row) -> None:
        self.check_model(grid, model, fingerprint)
        for run_id, doc in self._runs.items():
            if doc.get("grid") == grid:
                models = dict(doc.get("models") or {})
                models[model] = {**row, "fingerprint": fingerprint}
                self.update_run(run_id, models=models)

    # -- cells -------------------------------------------------------------------------------

    def _held_cells(self, grid: str) -> set[tuple[str, str, str]]:
        if self._held is None:
            self._held = set()
            run_ids = {r["run_id"] for r in self._grid_runs(grid)}
            files = visible_files(self.path / CELLS, "*.parquet")
            if files and run_ids:
                import duckdb

                rows = duckdb.sql(
                    "SELECT DISTINCT model, item, config FROM read_parquet($files) "
                    "WHERE list_contains($runs, run_id)",
                    params={"files": [str(f) for f in files], "runs": sorted(run_ids)}).fetchall()
                self._held = set(rows)
        return self._held

    def done_keys(self, grid: str, model: str) -> set[tuple[str, str]]:
        return {(i, c) for m, i, c in self._held_cells(grid) if m == model}

    def write_cells(self, grid: str, rows: list[CellRow]) -> int:
        """One part per committed batch; cells the folder already holds are left out."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        held = self._held_cells(grid)
        new = [r for r in rows if (r.model, r.item_uid, r.config_id) not in held]
        if not new:
            return 0
        items = {uid: it for uid, (_, it) in self._items.items()}
        table = pa.table({
            "model": [r.model for r in new], "item": [r.item_uid for r in new],
            "benchmark": [items[r.item_uid].benchmark for r in new],
            "config": [r.config_id for r in new], "correct": [r.correct for r in new],
            "pred": [r.pred for r in new], "raw_output": [r.raw_output for r in new],
            "subject": [items[r.item_uid].subject for r in new],
            "permutation": [r.permutation for r in new], "scores": [r.scores for r in new],
            "tokens": [r.tokens for r in new], "ms": [r.ms for r in new],
            "run_id": [r.run_id for r in new], "prompt_sha": [r.prompt_sha for r in new],
            "margin": [r.margin for r in new], "near_tie": [r.near_tie for r in new],
            "examples": [r.examples for r in new],
        }, schema=part_schema())
        run_id = new[0].run_id
        path = self._next_part(run_id)
        write_atomic(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
        held.update((r.model, r.item_uid, r.config_id) for r in new)
        return len(new)

    def _next_part(self, run_id: str) -> Path:
        while True:
            self._part_seq += 1
            path = self.path / CELLS / f"{run_id}-{self._part_seq:06d}.parquet"
            if not path.exists():  # a resumed run continues its numbering
                return path
