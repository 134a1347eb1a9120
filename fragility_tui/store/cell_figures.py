"""What a report reads from a grid's cells beside its cube: each model's cost per item and
the near-tie mask (Store mixes these in; every statement runs on Store.connect)."""

from __future__ import annotations

import numpy as np

from fragility_tui.grid.cube import Cube


class CellFigures:
    """Store's reads of cost and near-tie figures from the cells table."""

    def model_costs(self, grid: str) -> dict[str, dict]:
        """Seconds and tokens per item of each evaluated model (SPEC §9's cost dimension);
        None where the cells carry no timing. A grid none of whose cells carries any
        (imported or simulated) gives {} (read with .get: no cost), found without the
        per-model count of distinct items, which takes ~2 s on 52 M cells: the first query
        stops at the first timed cell, and DuckDB skips row groups whose ms and tokens are
        all NULL."""
        with self.connect() as con:
            timed = con.execute("SELECT 1 FROM cells WHERE grid = ? AND (ms IS NOT NULL OR "
                                "tokens IS NOT NULL) LIMIT 1", [grid]).fetchall()
            rows = con.execute("SELECT model, count(DISTINCT item_uid), sum(ms) / 1000.0, "
                               "sum(tokens) FROM cells WHERE grid = ? GROUP BY model",
                               [grid]).fetchall() if timed else []
        return {m: {"seconds_per_item": s / n if s is not None and n else None,
                    "tokens_per_item": t / n if t is not None and n else None}
                for m, n, s, t in rows}

    def near_tie_mask(self, grid: str, cube: Cube):
        """bool [M, I, C] aligned with `cube` (a cube of this grid, or a selection of it):
        True where the cell was recorded near_tie (runner docs: margins and near-ties)."""
        mask = np.zeros(cube.bits.shape, dtype=bool)
        with self.connect() as con:
            rows = con.execute("SELECT model, item_uid, config_id FROM cells "
                               "WHERE grid = ? AND near_tie", [grid]).fetchall()
        index = [{name: k for k, name in enumerate(names)}
                 for names in (cube.models, cube.items, cube.configs)]
        for key in rows:
            where = [ix.get(part) for ix, part in zip(index, key)]
            if None not in where:
                mask[tuple(where)] = True
        return mask
