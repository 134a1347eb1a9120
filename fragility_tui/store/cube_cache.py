"""A grid's dense cube, kept packed in the store beside its cells.

Building the cube from the cells table joins every cell on three strings: ~10 s for a
100 × 20,000 × 26 grid (52 M cells). The packed bits of that cube are 13 MB and read back
in well under a second. Every change to a grid's cells or items deletes its entry in the
same transaction (schema.forget_derived, called by Store.write_cell_table, add_items and
merge; delete_grid), and an entry is written only when the grid is provably unchanged
since its cells were read (same cell and item counts, same creation time), so a cached
cube is never stale.
Its table is declared with the others in schema.py (migration 4)."""

from __future__ import annotations

import json

import numpy as np

def grid_stamp(con, grid: str) -> tuple:
    """(creation time, cells, items) of a grid: what a cached cube must match."""
    created = con.execute("SELECT created_at FROM grids WHERE name = ?", [grid]).fetchall()
    n_cells = con.execute("SELECT count(*) FROM cells WHERE grid = ?", [grid]).fetchall()[0][0]
    n_items = con.execute("SELECT count(*) FROM items WHERE grid = ?", [grid]).fetchall()[0][0]
    return (created[0][0] if created else None, int(n_cells), int(n_items))


def read(con, grid: str):
    """(models, configs, bits, present) of the grid's cached cube, or None."""
    rows = con.execute("SELECT models, configs, shape, bits, present FROM cube_cache "
                       "WHERE grid = ?", [grid]).fetchall()
    if not rows:
        return None
    models, configs, shape, bits, present = rows[0]
    shape = tuple(json.loads(shape))
    size = int(np.prod(shape))
    # unpackbits gives 0/1 bytes: viewed as bool, not copied (52 M cells: ~0.1 s each)
    unpack = (lambda blob: np.unpackbits(np.frombuffer(blob, dtype=np.uint8),
                                         count=size).view(bool).reshape(shape))
    return tuple(json.loads(models)), tuple(json.loads(configs)), unpack(bits), unpack(present)


def write(con, grid: str, stamp: tuple, models, configs, bits: np.ndarray,
          present: np.ndarray) -> bool:
    """Cache a cube read from the cells when `stamp` still holds (inside a write
    transaction); returns whether it was written."""
    if grid_stamp(con, grid) != stamp:
        return False  # cells or items changed since they were read: a later load caches
    con.execute("DELETE FROM cube_cache WHERE grid = ?", [grid])
    con.execute("INSERT INTO cube_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [grid, stamp[0], stamp[1], stamp[2], json.dumps(list(models)),
                 json.dumps(list(configs)), json.dumps(list(bits.shape)),
                 np.packbits(bits.ravel()).tobytes(), np.packbits(present.ravel()).tobytes()])
    return True
