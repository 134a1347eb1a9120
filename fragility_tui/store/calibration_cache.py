"""Verdict calibrations (analysis/calibration.py) kept in the store, one row per pair.

A row is keyed by (grid, key, pair): `key` is a digest of the grid's content as calibrated
(the canonical cube's names, bits and presence), the reference and every setting
(calibration.cache_key), so a changed grid can never be served an old result: its key
differs. Rows are also deleted, like the packed cube (cube_cache.py), in the transaction
that adds cells or items to a grid or deletes it (schema.forget_derived; delete_grid), so old keys do not pile up. (A calibration that was computing while its grid
changed may still write its row afterwards under its old key; it is never read and goes with
the grid's next change.) Its table is declared with the others in schema.py (migration 5)."""

from __future__ import annotations

import json

from fragility_tui.store.schema import utc_now


class CalibrationRecords:
    """Store methods (mixed into grid.store.Store) for cached pair calibrations."""

    def calibration_results(self, grid: str, key: str) -> dict:
        """{(a, b): tallies} cached for this grid under this key."""
        with self.connect() as con:
            rows = con.execute("SELECT a, b, result FROM calibration_cache WHERE grid = ? "
                               "AND key = ?", [grid, key]).fetchall()
        return {(a, b): json.loads(result) for a, b, result in rows}

    def save_calibration(self, grid: str, key: str, results: dict) -> None:
        """Keep {(a, b): tallies} under key, in one transaction; a grid deleted meanwhile
        gets nothing."""
        if not results:
            return
        with self.connect(write=True) as con:
            if not con.execute("SELECT 1 FROM grids WHERE name = ?", [grid]).fetchall():
                return
            now = utc_now()
            con.executemany("INSERT OR REPLACE INTO calibration_cache VALUES (?, ?, ?, ?, ?, ?)",
                            [[grid, key, a, b, now, json.dumps(r, allow_nan=False)]
                             for (a, b), r in results.items()])
