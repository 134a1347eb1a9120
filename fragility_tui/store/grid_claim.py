"""A run's grid, checked and created in one store transaction when the run starts writing.

A run is checked once before its run row (runners/run/admission.py), but it may then wait
for its device slot for hours; meanwhile another run may create the grid with another seed
or item set. `claim_grid` reads the grid's settings, lets the caller's check refuse them, and
creates the grid (or adds the run's items) in the same transaction: DuckDB lets one process
at a time write the file, so no other run's grid can come between the check and the write.
"""

from __future__ import annotations

import json
from typing import Callable

from fragility_tui.items.item import Item, item_set_hash

# check(settings): settings is None for a grid that does not exist yet, else its row as
# grid_meta gives it, with the stored items' hash standing in for an imported grid's
# missing item-set hash. It raises (InputError) to refuse the run.
GridCheck = Callable[[dict | None], None]


def grid_settings(con, grid: str) -> dict | None:
    """The grid's row as this transaction reads it (None: no such grid)."""
    rows = con.execute("SELECT synthetic, description, seed, item_set_hash, meta FROM grids "
                       "WHERE name = ?", [grid]).fetchall()
    if not rows:
        return None
    synthetic, description, seed, recorded, meta = rows[0]
    if recorded is None:  # an imported grid: its stored items' hash stands in
        items = con.execute("SELECT item_uid, benchmark, subject, question, choices, gold "
                            "FROM items WHERE grid = ? ORDER BY position", [grid]).fetchall()
        recorded = item_set_hash([Item(u, b, s, q or "", tuple(c or ()), -1 if g is None else g)
                                  for u, b, s, q, c, g in items]) if items else None
    return {"synthetic": synthetic, "description": description, "seed": seed,
            "item_set_hash": recorded, **json.loads(meta or "{}")}


def claim_grid(store, con, grid: str, items: list[Item], *, positions: list[int] | None,
               seed: int, set_hash: str, description: str, meta: dict | None,
               check: GridCheck) -> int:
    """Inside the caller's write transaction `con`: check, create if absent, add the items.
    Returns how many items were new to the grid."""
    check(grid_settings(con, grid))
    store.create_grid(grid, seed=seed, item_set_hash=set_hash, description=description,
                      meta=meta, con=con)
    return store.add_items(grid, items, con=con, positions=positions)
