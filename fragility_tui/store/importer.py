"""Import and export of long-format grids (one row per cell).

A long-format grid has the columns model, item, config, correct and optionally benchmark,
subject, pred, raw_output. Everything is validated before the store is touched, and the
write is one transaction: a bad file leaves the store exactly as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fragility_tui.errors import InputError
from fragility_tui.files import write_output
from fragility_tui.store.writer import GridContent, write_grid
from fragility_tui.items.item import Item
from fragility_tui.store.long_grid import LongGrid

def items_for_grid(first_rows: list[tuple], attached: list[Item] | None,
                   path: str) -> list[Item]:
    """One Item per distinct grid item (`first_rows`: (uid, benchmark, subject) of each
    item's first row, in order of first appearance).

    With attached items (from --items), each grid item must match one by item_uid or by the
    source id (the part after "benchmark/"); the benchmark comes from the attached item."""
    if attached is None:
        return [Item(uid, benchmark or _benchmark_from_uid(uid), subject, "", (), -1)
                for uid, benchmark, subject in first_rows]
    by_uid = {it.item_uid: it for it in attached}
    by_source: dict[str, list[Item]] = {}
    for it in attached:
        by_source.setdefault(it.source_id, []).append(it)
    result = []
    for uid, _, _ in first_rows:
        found = by_uid.get(uid)
        if found is None:
            candidates = by_source.get(uid, [])
            if len(candidates) > 1:
                raise InputError(f"item {uid!r} matches {len(candidates)} items of the --items "
                                 "file (ambiguous source id; use benchmark/id in the grid)",
                                 path=path, field="item")
            found = candidates[0] if candidates else None
        if found is None:
            raise InputError(f"item {uid!r} of the grid is not in the --items file",
                             path=path, field="item")
        result.append(Item(uid, found.benchmark, found.subject, found.question, found.choices,
                           found.gold))
    return result


def _benchmark_from_uid(uid: str) -> str:
    return uid.split("/", 1)[0] if "/" in uid else "unknown"


def import_long_grid(store, path: str | Path, grid_name: str, *, items: list[Item] | None = None,
                     items_path: str | None = None, synthetic: bool = False,
                     description: str = "", replace: bool = False,
                     meta: dict | None = None, config_axes_path: str | None = None,
                     keep_comparisons: bool = False, provenance: dict | None = None) -> dict:
    """Validate then write a long-format grid as one transaction. Returns a summary.
    keep_comparisons: a replace keeps the grid's record of first comparisons; provenance: an
    exported provenance document written with the grid (write_grid).

    DuckDB reads, checks and inserts the cells (store/long_grid.py): a 52 M-cell Parquet file
    is imported without a Python object per cell, in bounded memory."""
    if not replace and store.has_grid(grid_name):  # before reading a large file
        raise InputError(f"grid {grid_name!r} already exists in {store.path}; choose another "
                         "--grid name or pass --replace", field="--grid")
    sidecar = read_config_axes(config_axes_path) if config_axes_path else {}
    grid = LongGrid(path)
    shape = grid.validate()
    config_axes = _merge_stated_axes(shape["cube"][1], shape["config_axes"], sidecar,
                                     config_axes_path)
    grid_items = items_for_grid(shape["items"], items, items_path or str(path))
    written = write_grid(store, GridContent(
        grid_name, grid_items,
        {m: (f"import:{Path(path).name}", {"imported_from": str(path)})
         for m in shape["models"]},
        grid, synthetic=synthetic, description=description or f"imported from {Path(path).name}",
        meta={"source": str(path), "items_source": items_path, **(meta or {})},
        cube=shape["cube"], config_axes=config_axes,
        axes_source=config_axes_path or (str(path) if config_axes else None),
        provenance=provenance),
        mode="replace" if replace else "new", keep_comparisons=keep_comparisons)
    return {"grid": grid_name, "cells": written, "models": len(shape["models"]),
            "items": len(grid_items), "configs": shape["configs"]}


def read_config_axes(path: str) -> dict[str, dict[str, str]]:
    """A --config-axes sidecar: JSON {config_id: {axis: level}} (SPEC v5 §2b)."""
    from fragility_tui.harness.config_axes import axis_levels_problem, config_id_problem

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such file", path=path, field="--config-axes") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not a JSON file of config axes: {exc}", path=path,
                         field="--config-axes") from None
    if not isinstance(doc, dict):
        raise InputError("must be a JSON object {config_id: {axis: level}}", path=path,
                         field="--config-axes")
    for config, axes in doc.items():
        problem = config_id_problem(config) or axis_levels_problem(config, axes)
        if problem:
            raise InputError(problem, path=path, field="--config-axes")
    return {c: {k: str(v) for k, v in a.items()} for c, a in doc.items()}


def _merge_stated_axes(configs, from_columns: dict, sidecar: dict, sidecar_path) -> dict:
    """The axes stated for the grid's configs: the axis_ columns' and the sidecar's, which
    must agree where both state an axis; a sidecar config not in the file is an error."""
    unknown = [c for c in sidecar if c not in configs]
    if unknown:
        raise InputError(f"config {unknown[0]!r} has axes but no cells in the grid file "
                         f"(its configs: {', '.join(configs)})", path=sidecar_path,
                         field="--config-axes")
    merged = {c: dict(a) for c, a in from_columns.items()}
    for config, axes in sidecar.items():
        for axis, level in axes.items():
            seen = merged.setdefault(config, {}).get(axis)
            if seen is not None and seen != level:
                raise InputError(f"config {config!r}: axis {axis} is {level!r} here and "
                                 f"{seen!r} in the grid file's axis_{axis} column",
                                 path=sidecar_path, field="--config-axes")
            merged[config][axis] = level
    return merged


class CubeCells:
    """A dense cube's present cells as a grid writer's source: inserted a model at a time,
    so a 100 × 20,000 × 26 grid never exists as one 52 M-row table."""

    def __init__(self, cube, pred=None):
        self.cube, self.pred = cube, pred  # pred: int8 [M, I, C] option chosen, or None

    def insert_into(self, con, grid: str) -> int:
        import pyarrow as pa

        from fragility_tui.store.connection import relational

        cube = self.cube
        written = 0
        for k, model in enumerate(cube.models):
            i, c = np.nonzero(cube.present[k])
            chunk = pa.table({
                "item_uid": pa.DictionaryArray.from_arrays(i.astype(np.int32), list(cube.items)),
                "config_id": pa.DictionaryArray.from_arrays(c.astype(np.int32),
                                                            list(cube.configs)),
                "correct": cube.bits[k, i, c],
                "pred": pa.nulls(len(i), pa.int8()) if self.pred is None
                else pa.array(self.pred[k, i, c], pa.int8())})
            relational(con).register("_cube_cells", chunk)
            con.execute("INSERT INTO cells (grid, model, item_uid, config_id, correct, pred) "
                        "SELECT $grid, $model, CAST(item_uid AS VARCHAR), "
                        "CAST(config_id AS VARCHAR), correct, pred FROM _cube_cells",
                        {"grid": grid, "model": model})
            con.unregister("_cube_cells")
            written += len(i)
        return written


def write_synthetic_grid(store, synthetic, grid_name: str, *, replace: bool = False) -> dict:
    """Write a simulate() result as a grid labelled synthetic, in one transaction: each
    cell with the option it chose (pred, native index; its permutation is the grid seed's
    shuffle, which `render` reproduces), the grid's metadata with the generator's true
    parameters (`SyntheticGrid.meta`)."""
    cube = synthetic.cube
    written = write_grid(store, GridContent(
        grid_name, synthetic.items,
        {model: ("synthetic", {"synthetic": True}) for model in cube.models},
        CubeCells(cube, synthetic.pred), synthetic=True, description=synthetic.description,
        meta=synthetic.meta(), cube=(cube.models, cube.configs, cube.bits, cube.present)),
        mode="replace" if replace else "new")
    return {"grid": grid_name, "cells": written, "models": len(cube.models),
            "items": len(cube.items), "configs": len(cube.configs)}


def export_cells(store, grid_name: str, out: str | Path, fmt: str) -> int:
    """Write one row per cell (model, item, benchmark, config, correct, pred, raw_output)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    store.grid_info(grid_name)  # clear error for an unknown grid
    table = store.export_cells(grid_name)
    if fmt == "csv":
        write_output(out, lambda fh: pacsv.write_csv(_scores_as_json(table), fh))
    elif fmt == "parquet":
        write_output(out, lambda fh: pq.write_table(table, fh, compression="zstd"))
    else:
        raise InputError(f"unknown export format {fmt!r} (csv, parquet)", field="--format")
    return table.num_rows


def _scores_as_json(table):
    """CSV has no list type: write the option log-likelihoods (and a +kN cell's examples)
    as JSON text."""
    import pyarrow as pa

    for name in ("scores", "examples"):
        if name in table.column_names:
            text = [None if v is None else json.dumps(v) for v in table.column(name).to_pylist()]
            table = table.set_column(table.column_names.index(name), name,
                                     pa.array(text, pa.string()))
    return table
