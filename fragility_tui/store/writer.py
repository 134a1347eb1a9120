"""The one way a whole grid (or a batch of another tool's cells) gets into the store:
import, simulate and import-lmeval all write through `write_grid`, in one transaction, so
a failure leaves the store as it was."""

from __future__ import annotations

from dataclasses import dataclass, field

from fragility_tui.errors import InputError
from fragility_tui.store import cube_cache
from fragility_tui.store.comparisons import comparison_rows, restore_comparison_rows
from fragility_tui.store.grid_configs import declare_axes
from fragility_tui.items.item import Item


@dataclass
class GridContent:
    """What to write: the grid row's settings, its items, its models (name -> (source,
    provenance)) and its cells: an Arrow table in `store_schema.cell_schema()`, or a source
    that inserts them itself (`insert_into(con, grid)`, e.g. a validated long_grid.LongGrid
    that DuckDB streams from its file)."""

    name: str
    items: list[Item]
    models: dict[str, tuple[str, dict]]
    cells: object  # pyarrow.Table
    synthetic: bool = False
    description: str = ""
    meta: dict = field(default_factory=dict)
    # (models, configs, bits, present) when the writer already has the dense cube: it is
    # packed as it is instead of being read back from the cells just written
    cube: tuple | None = None
    # SPEC §2b: {config_id: axes} stated for configs whose ids do not say them all, and
    # where they were read from
    config_axes: dict = field(default_factory=dict)
    axes_source: str | None = None
    # an `export --what provenance --format json` document (a shipped real grid's harness
    # disclosure, SPEC §10): its models' records, and its runs in place of the grid's
    # imported ones
    provenance: dict | None = None
    # (model, config) pairs whose cells this content brings whole ("add" mode): one the grid
    # already holds is refused, or with `replace_existing` its old cells are dropped first
    pairs: tuple = ()
    replace_existing: bool = False


def write_grid(store, content: GridContent, *, mode: str = "new",
               keep_comparisons: bool = False) -> int:
    """Write `content`; returns the number of new cells.

    mode "new": the grid must not exist yet; "replace": an existing grid of that name is
    dropped first; "add": the grid is created if absent, and items, models and cells are
    added to it (cells already present are kept). keep_comparisons (with "replace"): the
    grid's record of first comparisons is written back as it was, in this transaction (a
    shipped grid's newer version: store/comparisons.py says why)."""
    if mode not in ("new", "replace", "add"):
        raise ValueError(f"unknown write mode {mode!r}")
    if mode == "new" and store.has_grid(content.name):
        raise InputError(f"grid {content.name!r} already exists in {store.path}; choose another "
                         "--grid name or pass --replace", field="--grid")
    with store.connect(write=True) as con:
        kept = []
        if mode == "replace":
            if keep_comparisons:
                kept = comparison_rows(con, content.name)
            store.delete_grid(content.name, con=con)
        if mode == "add" and not content.synthetic:
            refuse_synthetic(con, content.name)
        _take_pairs(con, content)
        store.create_grid(content.name, synthetic=content.synthetic,
                          description=content.description, meta=content.meta, con=con)
        restore_comparison_rows(con, kept)
        store.add_items(content.name, content.items, con=con)
        declare_axes(con, content.name, content.config_axes, content.axes_source)
        for model, (source, provenance) in content.models.items():
            store.upsert_model(content.name, model, source=source, provenance=provenance,
                               con=con)
        if content.provenance is not None:
            _write_provenance(store, con, content.name, content.provenance)
        if hasattr(content.cells, "insert_into"):
            written = content.cells.insert_into(con, content.name)
        else:
            written = store.write_cell_table(content.cells, con)
        # the app opens a new grid without a cold read
        if content.cube is not None and mode != "add":
            cube_cache.write(con, content.name, cube_cache.grid_stamp(con, content.name),
                             *content.cube)
        else:
            store.cache_cube(content.name, con)
        return written


def _take_pairs(con, content: GridContent) -> None:
    for model, config in content.pairs:
        where = "WHERE grid = ? AND model = ? AND config_id = ?"
        args = [content.name, model, config]
        n = con.execute(f"SELECT count(*) FROM cells {where}", args).fetchall()[0][0]
        if n and not content.replace_existing:
            raise InputError(f"grid {content.name!r} already has {n} cells of model {model!r} "
                             f"under {config}; pass --replace to replace them", field="--grid")
        con.execute(f"DELETE FROM cells {where}", args)


def refuse_synthetic(con, grid: str) -> None:
    """Real cells never go into a SYNTHETIC grid (its label would then be wrong for them):
    as `run` refuses one, so do the importers that add to a grid."""
    row = con.execute("SELECT synthetic FROM grids WHERE name = ?", [grid]).fetchall()
    if row and row[0][0]:
        raise InputError(f"grid {grid!r} is SYNTHETIC (simulated cells, labelled so "
                         "everywhere): real cells do not go into it; name another --grid (a "
                         "new name creates one)", field="--grid")


def _write_provenance(store, con, grid: str, doc: dict) -> None:
    """The document's models and runs, in the caller's transaction. The grid's imported runs
    (no pid) are replaced by the document's; a local run's row is kept."""
    for m in doc.get("models", []):
        store.upsert_model(grid, m["model"], source=m.get("source"), revision=m.get("revision"),
                           dtype=m.get("dtype"), quantization=m.get("quantization"),
                           base_model=m.get("base_model"), provenance=m.get("provenance") or {},
                           fingerprint=m.get("fingerprint"), con=con)
    store.delete_imported_runs(grid, con=con)
    kept = {row[0] for row in con.execute("SELECT run_id FROM runs WHERE grid = ?",
                                          [grid]).fetchall()}
    for run in doc.get("runs", []):
        if run["run_id"] not in kept:
            store.create_run({**run, "grid": grid, "pid": None}, con=con)
