"""What a report and the app read from a grid's cells beside its cube: each model's cost per
item, the near-tie mask, one item's cells and the cells as exported (Store mixes these in;
every statement runs on Store.connect)."""

from __future__ import annotations

import numpy as np

from fragility_tui.grid.cube import Cube
from fragility_tui.harness.config_axes import config_sort_key
from fragility_tui.store.connection import relational
from fragility_tui.store.grid_configs import POSITIONS_SQL, grid_config_ids, stated_axes


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

    def item_cells(self, grid: str, item_uid: str) -> list[dict]:
        """Every cell of one item (all models, all configs), canonical config order."""
        with self.connect() as con:
            cur = con.execute("""
                SELECT c.model, c.config_id, c.correct, c.pred, c.permutation, c.raw_output,
                       c.scores, c.tokens, c.ms, c.run_id, c.prompt_sha, c.margin, c.near_tie,
                       c.prompt, c.examples
                FROM cells c WHERE c.grid = ? AND c.item_uid = ?""", [grid, item_uid])
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
        return sorted(rows, key=lambda r: (r["model"], config_sort_key(r["config_id"])))

    def export_cells(self, grid: str):
        """All cells of a grid as an Arrow table: the export contract's columns (model, item,
        benchmark, config, correct, pred, raw_output) first, then everything else a cell
        records, then the axes stated for its config (`axis_<name>`: an imported config's),
        so an export re-imports without loss."""
        with self.connect() as con:
            configs = grid_config_ids(con, grid)
            names = sorted({a for axes in stated_axes(con, grid).values() for a in axes})
            axes = "".join(f", json_extract_string(g.axes, {_sql_text('$.' + _json_key(a))}) "
                           f"AS {_sql_name('axis_' + a)}" for a in names)
            return relational(con).sql(f"""
                SELECT c.model, c.item_uid AS item, i.benchmark, c.config_id AS config,
                       c.correct, c.pred, c.raw_output, i.subject, c.permutation, c.scores,
                       c.tokens, c.ms, c.run_id, c.prompt_sha, c.margin, c.near_tie,
                       c.examples, c.prompt{axes}
                FROM cells c LEFT JOIN items i ON i.grid = c.grid AND i.item_uid = c.item_uid
                LEFT JOIN {POSITIONS_SQL} f ON f.config_id = c.config_id
                LEFT JOIN grid_configs g ON g.grid = c.grid AND g.config_id = c.config_id
                WHERE c.grid = $g ORDER BY c.model, i.position, f.position""",
                params={"g": grid, "configs": configs}).to_arrow_table()


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _json_key(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
