"""The grids shipped in sample_grids/ (see its manifest.json): loaded into a store on first
use, and replaced by their newer shipped version after an upgrade unless a local run wrote
into them; a replaced grid keeps its record of first comparisons (store/comparisons.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from fragility_tui.store.importer import import_long_grid
from fragility_tui.hashing import sha256_file

SAMPLE_GRIDS_DIR = Path(__file__).resolve().parents[2] / "sample_grids"


def sample_grid_files() -> list[tuple[Path, dict]]:
    """(cells file, metadata) for each grid shipped in sample_grids/ (see its manifest)."""
    manifest = SAMPLE_GRIDS_DIR / "manifest.json"
    if not manifest.is_file():
        return []
    entries = json.loads(manifest.read_text())
    return [(SAMPLE_GRIDS_DIR / e["cells"], e) for e in entries["grids"]]


def recorded_sample_grids(store) -> set[str] | None:
    """The shipped grids this store was given before; None when it never was."""
    with store.connect() as con:
        row = con.execute("SELECT value FROM meta WHERE key = 'sample_grids_loaded'").fetchall()
    return set(json.loads(row[0][0])) if row else None


def record_sample_grids(store, names: set[str]) -> None:
    with store.connect(write=True) as con:
        con.execute("INSERT OR REPLACE INTO meta VALUES ('sample_grids_loaded', ?)",
                    [json.dumps(sorted(names))])


def load_sample_grids(store, recorded: set[str] | None = None, progress=None) -> list[str]:
    """Load each shipped grid the store lacks, and replace one that still holds an older
    shipped version (a newer release updated its file); returns the names written.

    A grid stays as it is when a local run has written into it, or when it is not the
    shipped one (a user grid of the same name). `recorded` names the shipped grids loaded
    into this store before: one of them missing now was deleted by the user, and stays so.
    `progress(k, n, name)`, when given, is called before the k-th of n shipped grids."""
    loaded = []
    files = sample_grid_files()
    for k, (cells_path, meta) in enumerate(files):
        name = meta["name"]
        if not cells_path.is_file():
            continue
        digest = shipped_digest(cells_path, meta)
        if store.has_grid(name):
            if not _holds_older_shipped_version(store, name, cells_path, digest):
                continue
        elif recorded is not None and name in recorded:
            continue
        if progress is not None:
            progress(k + 1, len(files), name)
        _load_sample_grid(store, cells_path, meta, digest)
        loaded.append(name)
    return loaded


def shipped_digest(cells_path: Path, meta: dict) -> str:
    """The shipped version of a grid: its cells file and, where it has one, its provenance
    file (a release that only corrects the provenance still reaches existing stores)."""
    digest = sha256_file(cells_path)
    if meta.get("provenance") and (SAMPLE_GRIDS_DIR / meta["provenance"]).is_file():
        provenance = sha256_file(SAMPLE_GRIDS_DIR / meta["provenance"])
        digest = hashlib.sha256(f"{digest}:{provenance}".encode()).hexdigest()
    return digest


def _load_sample_grid(store, cells_path: Path, meta: dict, digest: str) -> None:
    items, grid_meta = None, {"sample_sha256": digest}
    if meta.get("items"):
        from fragility_tui.items.loaders import load_items

        items, _ = load_items(SAMPLE_GRIDS_DIR / meta["items"])
    elif meta.get("simulate"):  # synthetic: the generator's items and true parameters
        from fragility_tui.grid.simulate import simulate

        synthetic = simulate(**meta["simulate"])
        items = synthetic.items
        grid_meta.update(synthetic.meta())
    provenance = (json.loads((SAMPLE_GRIDS_DIR / meta["provenance"]).read_text())
                  if meta.get("provenance") else None)
    # a newer version keeps the grid's record of first comparisons (the guard against seed
    # shopping: store/comparisons.py), and its provenance replaces the old version's imported
    # runs, all in the replace's own transaction
    import_long_grid(store, cells_path, meta["name"], items=items,
                     synthetic=meta.get("synthetic", False),
                     description=meta.get("description", ""), replace=True,
                     meta=grid_meta, keep_comparisons=True, provenance=provenance)
    with store.connect(write=True) as con:  # what a later upgrade checks is still all there
        con.execute("UPDATE grids SET meta = ? WHERE name = ?", [json.dumps(
            {**grid_meta, "sample_cells": cells_digest(con, meta["name"])}), meta["name"]])


def cells_digest(con, grid: str) -> str:
    """The grid's cells, summed up: their number and an order-free hash of every cell's
    key, answer and output. A log import, a run or a --replace into the grid changes it."""
    n, mix = con.execute(
        "SELECT count(*), coalesce(bit_xor(hash(model, item_uid, config_id, correct, pred, "
        "raw_output)), 0) FROM cells WHERE grid = ?", [grid]).fetchall()[0]
    return f"{n}:{mix}"


def _holds_older_shipped_version(store, name: str, cells_path: Path, digest: str) -> bool:
    grid = store.grid_meta(name)
    if grid.get("sample_sha256") == digest:
        return False
    # Loaded from sample_grids/: recorded since sample_sha256 exists, by its source before.
    shipped = "sample_sha256" in grid or Path(grid.get("source") or "").name == cells_path.name
    return shipped and not store.has_local_runs(name) and not _written_since(store, name, grid)


def _written_since(store, name: str, grid: dict) -> bool:
    """Whether cells came into the grid, or changed, since its shipped version was loaded
    (imported logs, an import-lmeval, a merge): an upgrade would drop them. Grids loaded
    before the digest was recorded have only the local-run rule."""
    if "sample_cells" not in grid:
        return False
    with store.connect() as con:
        return cells_digest(con, name) != grid["sample_cells"]


def shipped_cube(name: str):
    """The cube of a shipped grid read straight from its cells file (no store), e.g. to
    recompute the figures docs/spec.md quotes for it."""
    import pyarrow.parquet as pq

    from fragility_tui.grid.cube import cube_from_long

    entries = {meta["name"]: path for path, meta in sample_grid_files()}
    if name not in entries:
        raise KeyError(f"no shipped grid {name!r} (shipped: {', '.join(entries)})")
    table = pq.read_table(entries[name], columns=["model", "item", "config", "correct",
                                                 "benchmark"])
    items = table.column("item").to_pylist()
    benchmarks = dict(zip(items, table.column("benchmark").to_pylist()))
    return cube_from_long(table.column("model").to_pylist(), items,
                          table.column("config").to_pylist(),
                          table.column("correct").to_numpy(zero_copy_only=False), benchmarks)
