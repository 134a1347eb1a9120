"""The one way a whole grid (or a batch of another tool's cells) gets into the store:
import, simulate and import-lmeval all write through `write_grid`, in one transaction, so
a failure leaves the store as it was."""

from __future__ import annotations

from dataclasses import dataclass, field

from fragility_tui.errors import InputError
from fragility_tui.grid.items import Item


@dataclass
class GridContent:
    """What to write: the grid row's settings, its items, its models (name -> (source,
    provenance)) and its cells as an Arrow table in `store_schema.cell_schema()`."""

    name: str
    items: list[Item]
    models: dict[str, tuple[str, dict]]
    cells: object  # pyarrow.Table
    synthetic: bool = False
    description: str = ""
    meta: dict = field(default_factory=dict)


def write_grid(store, content: GridContent, *, mode: str = "new") -> int:
    """Write `content`; returns the number of new cells.

    mode "new": the grid must not exist yet; "replace": an existing grid of that name is
    dropped first; "add": the grid is created if absent, and items, models and cells are
    added to it (cells already present are kept)."""
    if mode not in ("new", "replace", "add"):
        raise ValueError(f"unknown write mode {mode!r}")
    if mode == "new" and store.has_grid(content.name):
        raise InputError(f"grid {content.name!r} already exists in {store.path}; choose another "
                         "--grid name or pass --replace", field="--grid")
    with store.connect(write=True) as con:
        if mode == "replace":
            store.delete_grid(content.name, con=con)
        store.create_grid(content.name, synthetic=content.synthetic,
                          description=content.description, meta=content.meta, con=con)
        store.add_items(content.name, content.items, con=con)
        for model, (source, provenance) in content.models.items():
            store.upsert_model(content.name, model, source=source, provenance=provenance,
                               con=con)
        written = store.write_cell_table(content.cells, con)
        store.cache_cube(content.name, con)  # the app opens a new grid without a cold read
        return written
