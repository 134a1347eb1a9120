"""The first sequential comparison of each (pair, reference, target) in a grid (issue 58).

`compare` guarantees its error rates over the draw of the item order (the seed) for one
comparison decided in advance. Rerunning other seeds on one grid until one settles, or
picking the reference after reading a report, is many comparisons of the same cells: their
errors add up. So the first comparison of a pair is kept with its seed, reference and
verdict; `compare` reads it back and says when the one it runs now is not that one
(services/comparisons.py). The pair is unordered (A vs B is B vs A mirrored): rows are
keyed by the two names sorted, with `a` and `b` as the first comparison named them.

A row is inserted once per (grid, pair, reference, target) and updated only by the same
comparison again (same seed, scope, margin and chunk: a live run resumed, or the same replay
over more cells).
Declared with the other tables in schema.py (migration 9); deleted with its grid, and by a
user's `import --replace` (a new grid under an old name starts afresh, as a deleted one).

Kept, every row of the grid as it was, when a shipped sample grid is replaced by its newer
version (`load-samples`, or the upgrade the default store gets on opening; sample_grids.py),
in the transaction that replaces the grid (`write_grid(..., keep_comparisons=True)`: a
failed replace leaves the old grid with its rows, never one without the other). The upgrade
is not the user's doing, and the record is of what the user has looked at: a first
comparison on the older version's cells was a look at this grid, so a later seed or
reference is still a replay of it. All rows, not only the pairs the new version still has:
a row is read by its pair only, so one of a model the new version dropped shows nowhere and
costs a row, and it stands again if that model comes back (a later release, a run under its
name); dropping rows would need a judgement of when a model of one version is "the same" in
the next, which the record does not need."""

from __future__ import annotations

import json

from fragility_tui.store.schema import utc_now

_COLUMNS = ("reference", "target", "a", "b", "seed", "scope", "margin", "chunk", "live",
            "created_at", "updated_at", "result")
_ROW = ("grid", "model_1", "model_2", *_COLUMNS)


def comparison_rows(con, grid: str) -> list[tuple]:
    """Every comparisons row of the grid as stored, for `restore_comparison_rows` once the
    grid is written again (in the same transaction)."""
    return con.execute(f"SELECT {', '.join(_ROW)} FROM comparisons WHERE grid = ?",
                       [grid]).fetchall()


def restore_comparison_rows(con, rows: list[tuple]) -> None:
    if rows:
        con.executemany(f"INSERT INTO comparisons ({', '.join(_ROW)}) VALUES "
                        f"({', '.join('?' * len(_ROW))})", rows)


def same_comparison(first, this) -> bool:
    """Whether two (seed, scope, margin, chunk) settings are one comparison."""
    seed, scope, margin, chunk = first
    return (int(seed) == int(this[0]) and scope == this[1]
            and abs(float(margin) - float(this[2])) < 1e-12 and int(chunk) == int(this[3]))


class ComparisonRecords:
    """Store methods (mixed into store.Store) for the comparisons table."""

    def comparisons(self, grid: str, a: str, b: str, target: str) -> list[dict]:
        """Every recorded comparison of the pair under this target, the first first."""
        one, two = sorted((a, b))
        with self.connect() as con:
            rows = con.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM comparisons WHERE grid = ? AND "
                "model_1 = ? AND model_2 = ? AND target = ? ORDER BY created_at, reference",
                [grid, one, two, target]).fetchall()
        out = []
        for row in rows:
            record = dict(zip(_COLUMNS, row))
            record["result"] = json.loads(record["result"]) if record["result"] else None
            for key in ("created_at", "updated_at"):
                if record[key] is not None:
                    record[key] = record[key].isoformat(timespec="seconds")
            out.append(record)
        return out

    def record_comparison(self, grid: str, *, a: str, b: str, reference: str, target: str,
                          seed: int, scope: str, margin: float, chunk: int, live: bool,
                          result: dict | None) -> None:
        """Insert the pair's first comparison at this reference and target; a row already
        there is updated only by the same comparison again: its seed, scope, margin and
        chunk (another margin or chunk is another look at the same cells, not its
        continuation)."""
        one, two = sorted((a, b))
        now = utc_now()
        text = None if result is None else json.dumps(result, allow_nan=False)
        with self.connect(write=True) as con:
            key = [grid, one, two, reference, target]
            where = ("grid = ? AND model_1 = ? AND model_2 = ? AND reference = ? AND "
                     "target = ?")
            rows = con.execute(f"SELECT seed, scope, margin, chunk FROM comparisons "
                               f"WHERE {where}", key).fetchall()
            if not rows:
                con.execute("INSERT INTO comparisons VALUES "
                            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [*key, a, b, seed, scope, margin, chunk, live, now, now, text])
            elif same_comparison(rows[0], (seed, scope, margin, chunk)) and result is not None:
                con.execute(f"UPDATE comparisons SET updated_at = ?, result = ? WHERE {where}",
                            [now, text, *key])
