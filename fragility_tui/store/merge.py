"""`fragility-tui merge`: bring the parts of store-less workers (store/parts.py) into a grid.

One transaction: the grid (created with the parts' seed and item-set hash when absent), the
items, each model's row, every run's own record and provenance, and the cells, streamed a
batch at a time and placed by index in the grid's dense cube (store/merge_cells.py), so
merging again, or a part that is there twice, adds nothing, and no Python object is made
per cell.

Refused, before anything is written: parts whose seed or item set differs from each other or
from the grid's, a model whose parts were made under different settings (its fingerprint)
or under settings other than the grid's model row, a cell whose run, model, item or config
its folder does not account for, and unreadable files (each error names the file).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.items.item import Item
from fragility_tui.store.models import fingerprint_diff
from fragility_tui.store.parts import (CELLS, ITEMS, RUNS, item_schema, part_schema, read_json,
                                      visible_files)
from fragility_tui.harness.config_axes import is_runner_config
from fragility_tui.store.runs import RunRecord
from fragility_tui.store import cube_cache
from fragility_tui.store.connection import memory_limit
from fragility_tui.store.writer import refuse_synthetic
from fragility_tui.store.merge_cells import LATER_COLUMNS, CellMerger

MEMORY_LIMIT = "1GB"


@dataclass
class Parts:
    """What the folders hold, read and checked (cells stay in their files)."""

    runs: dict[str, tuple[Path, dict]] = field(default_factory=dict)  # run_id -> (file, doc)
    items: dict[str, tuple[int, Item, Path]] = field(default_factory=dict)
    cell_files: list[Path] = field(default_factory=list)


def read_parts(folders: list[str | Path]) -> Parts:
    parts = Parts()
    for folder in map(Path, folders):
        if not (folder / RUNS).is_dir():
            raise InputError("not a parts folder (no runs/ inside): write one with "
                             "`fragility-tui run --out-parts DIR`", path=str(folder))
        # Parts first: workers may still be writing (a launcher merges as tasks finish). A
        # worker records its run, models and items before its first part and never removes
        # them, so the records read next account for every part listed here; a part written
        # after this listing waits for the next merge.
        parts.cell_files += visible_files(folder / CELLS, "*.parquet")
        for path in visible_files(folder / RUNS, "*.json"):
            doc = read_json(path)
            run_id = doc.get("run_id")
            if not isinstance(run_id, str) or not run_id:
                raise InputError("the run record has no run_id", path=str(path))
            parts.runs.setdefault(run_id, (path, doc))  # the same run in two folders: a copy
        for path in visible_files(folder / ITEMS, "*.parquet"):
            _read_items(path, parts.items)
    if not parts.runs:
        raise InputError("no run records in " + ", ".join(map(str, folders)))
    for path in parts.cell_files:
        _check_part_schema(path)
    return parts


def _read_items(path: Path, into: dict) -> None:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, schema=item_schema())
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(f"cannot read the items part: {exc}", path=str(path)) from None
    for row in table.to_pylist():
        item = Item(row["item_uid"], row["benchmark"], row["subject"], row["question"] or "",
                    tuple(row["choices"] or ()), -1 if row["gold"] is None else row["gold"])
        seen = into.get(item.item_uid)
        if seen is not None and seen[1] != item:
            raise InputError(f"item {item.item_uid!r} differs from the same item in {seen[2]}: "
                             "the parts were made from different item files", path=str(path))
        into.setdefault(item.item_uid, (row["position"], item, path))


def _check_part_schema(path: Path) -> None:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:
        raise InputError(f"cannot read the cells part: {exc}", path=str(path)) from None
    # margin, near_tie and examples came later: a part written before them merges with
    # NULLs there.
    missing = [f.name for f in part_schema()
               if f.name not in schema.names and f.name not in LATER_COLUMNS]
    if missing:
        raise InputError(f"not a cells part: missing column(s) {', '.join(missing)}",
                         path=str(path))


def _settings(parts: Parts) -> dict:
    """The one seed and item-set hash every run of the parts was made with."""
    first = None
    for run_id, (path, doc) in sorted(parts.runs.items()):
        prov = doc.get("provenance") or {}
        settings = {"seed": prov.get("seed"), "item_set_hash": prov.get("item_set_hash")}
        if settings["seed"] is None:
            continue  # a run that stopped before it loaded its items wrote no cells
        if first is None:
            first = (path, settings)
        elif settings != first[1]:
            what = "seed" if settings["seed"] != first[1]["seed"] else "item set"
            raise InputError(f"this run's {what} differs from that of {first[0].name} "
                             f"({settings} vs {first[1]}): parts of one grid share one seed "
                             "and one sampled item set", path=str(path))
    if first is None:
        raise InputError("no run in the parts got as far as loading its items; nothing to merge")
    return first[1]


def _models(parts: Parts) -> dict[str, tuple[Path, dict]]:
    """model -> (a run file, its row); a model recorded with two settings is refused."""
    models: dict[str, tuple[Path, dict]] = {}
    for _, (path, doc) in sorted(parts.runs.items()):
        for name, row in (doc.get("models") or {}).items():
            if name not in models:
                models[name] = (path, row)
                continue
            differences = fingerprint_diff(models[name][1].get("fingerprint"),
                                           row.get("fingerprint") or {})
            if differences:
                raise InputError(f"model {name!r} was evaluated with other settings here than "
                                 f"in {models[name][0].name} ({'; '.join(differences)}); its "
                                 "cells would mix two settings", path=str(path))
    return models


def merge_parts(store, folders: list[str | Path], grid: str) -> dict:
    """Merge the parts under `folders` into `grid` (one transaction); returns a summary."""
    parts = read_parts(folders)
    settings = _settings(parts)
    models = _models(parts)
    with store.connect(write=True) as con, memory_limit(con, MEMORY_LIMIT):
        _check_grid(con, grid, settings, parts)
        existing = cube_cache.read(con, grid) or store.cube_from_cells(con, grid)
        store.create_grid(grid, seed=settings["seed"], item_set_hash=settings["item_set_hash"],
                          description="merged from parts: " + ", ".join(
                              Path(f).name for f in folders), meta={"merged": True}, con=con)
        items = [it for _, it, _ in sorted(parts.items.values(), key=lambda v: v[0])]
        new_items = store.add_items(grid, items, con=con)
        for name, (path, row) in models.items():
            store.record_model(grid, name, fingerprint=row.get("fingerprint") or {},
                               source=row.get("source"), revision=row.get("revision"),
                               dtype=row.get("dtype"), quantization=row.get("quantization"),
                               base_model=row.get("base_model"),
                               provenance=row.get("provenance") or {}, con=con)
        for run_id, (path, doc) in parts.runs.items():
            # The run as its worker recorded it (a later merge brings its newer state).
            store.put_run(replace(RunRecord.from_row(doc), run_id=run_id, grid=grid,
                                  events_path=_own_events(path, run_id)), con)
        # every config a run was asked for (extension configs too), checked by the merger
        asked = [c for _, doc in parts.runs.values()
                 for c in (RunRecord.from_row(doc).spec.get("configs") or [])
                 if isinstance(c, str) and is_runner_config(c)]
        merger = CellMerger(con, grid, existing, {
            run_id: sorted(doc.get("models") or {}) for run_id, (_, doc) in parts.runs.items()},
            set(parts.items), asked)
        merger.merge(parts.cell_files)
        merger.pack_cube()
        total = con.execute("SELECT count(*) FROM cells WHERE grid = ?", [grid]).fetchall()[0][0]
    return {"grid": grid, "folders": [str(f) for f in folders], "runs": len(parts.runs),
            "parts": len(parts.cell_files), "models": sorted(models), "items_added": new_items,
            "cells_added": merger.added, "cells": total}


def _check_grid(con, grid: str, settings: dict, parts: Parts) -> None:
    refuse_synthetic(con, grid)
    rows = con.execute("SELECT seed, item_set_hash FROM grids WHERE name = ?", [grid]).fetchall()
    if not rows:
        return
    seed, set_hash = rows[0]
    if seed is not None and int(seed) != int(settings["seed"]):
        raise InputError(f"grid {grid!r} was made with seed {seed}, the parts with seed "
                         f"{settings['seed']}: the option shuffles differ", field="--grid")
    if set_hash is not None and set_hash != settings["item_set_hash"]:
        raise InputError(f"grid {grid!r} holds another item set than the parts (item-set hash "
                         f"{set_hash[:12]}… vs {str(settings['item_set_hash'])[:12]}…)",
                         field="--grid")
    existing = {r[0]: Item(*r[:5], -1 if r[5] is None else r[5]) for r in con.execute(
        "SELECT item_uid, benchmark, subject, coalesce(question, ''), coalesce(choices, []), "
        "gold FROM items WHERE grid = ?", [grid]).fetchall()}
    for uid, (_, item, path) in parts.items.items():
        old = existing.get(uid)
        if old is not None and (old.question, tuple(old.choices), old.gold) != (
                item.question, item.choices, item.gold):
            raise InputError(f"item {uid!r} differs from grid {grid!r}'s item of that id",
                             path=str(path))


def _own_events(run_file: Path, run_id: str) -> str | None:
    """The run's events file in its own parts folder (DIR/events/RUN_ID.jsonl), if it is a
    file there; never the path the run record names, which the app would read (a record
    naming /dev/zero made it grow to gigabytes)."""
    folder = (run_file.parent.parent / "events").resolve()
    events = (folder / f"{run_id}.jsonl").resolve()
    return str(events) if events.parent == folder and events.is_file() else None
