"""The runs table's SQL: Store's methods (mixed in, using its `connect`) that create,
update, list and delete run rows, read back as `RunRecord`s (store/runs.py)."""

from __future__ import annotations

import json

from fragility_tui.store.runs import RunRecord, RunStatus, new_run_id
from fragility_tui.store.schema import JSON_RUN_FIELDS, RUN_FIELDS, utc_now


def _column_values(fields: dict) -> list:
    """The runs table's column values (after run_id) of a field dict: JSON fields dumped."""
    values = []
    for k in RUN_FIELDS:
        v = fields.get(k)
        if k in JSON_RUN_FIELDS and v is not None and not isinstance(v, str):
            v = json.dumps(v, sort_keys=True, default=str)
        values.append(v)
    return values


def _insert_run(con, run_id: str, fields: dict) -> None:
    con.execute(f"INSERT INTO runs (run_id, {', '.join(RUN_FIELDS)}) VALUES "
                f"({', '.join('?' * (len(RUN_FIELDS) + 1))})",
                [run_id] + _column_values(fields))


class RunRecords:
    def create_run(self, run: dict, con=None) -> str:
        """Record a new run from its known fields (others ignored); returns its run_id. con:
        in the caller's transaction."""
        run_id = run.get("run_id") or new_run_id()
        fields = {k: run.get(k) for k in RUN_FIELDS}
        fields["created_at"] = fields["created_at"] or utc_now()
        fields["status"] = fields["status"] or RunStatus.QUEUED.value
        self._in_transaction(con, lambda c: _insert_run(c, run_id, fields))
        return run_id

    def put_run(self, record: RunRecord, con) -> None:
        """Write a run as recorded elsewhere (a worker's parts), replacing the row of that
        run_id, inside the caller's transaction: a later merge brings its newer state."""
        con.execute("DELETE FROM runs WHERE run_id = ?", [record.run_id])
        _insert_run(con, record.run_id, record.to_dict())

    def update_run(self, run_id: str, **fields) -> None:
        unknown = set(fields) - set(RUN_FIELDS)
        if unknown:
            raise ValueError(f"unknown run field(s): {', '.join(sorted(unknown))}")
        if not fields:
            return
        values = [json.dumps(v, sort_keys=True, default=str)
                  if k in JSON_RUN_FIELDS and v is not None and not isinstance(v, str) else v
                  for k, v in fields.items()]
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.connect(write=True) as con:
            con.execute(f"UPDATE runs SET {assignments} WHERE run_id = ?", values + [run_id])

    def has_local_runs(self, grid: str) -> bool:
        """Whether a run of this machine wrote into the grid (imported runs have no pid)."""
        with self.connect() as con:
            return con.execute("SELECT 1 FROM runs WHERE grid = ? AND pid IS NOT NULL LIMIT 1",
                               [grid]).fetchall() != []

    def delete_imported_runs(self, grid: str, con=None) -> None:
        """Drop the run rows imported with a grid's provenance (no pid), e.g. on replacing it;
        con: in the caller's transaction."""
        self._in_transaction(con, lambda c: c.execute(
            "DELETE FROM runs WHERE grid = ? AND pid IS NULL", [grid]))

    def delete_runs(self, run_ids: list[str]) -> None:
        """Forget run records (`runs delete`, `grids delete`); cells they wrote stay."""
        with self.connect(write=True) as con:
            con.executemany("DELETE FROM runs WHERE run_id = ?", [[r] for r in run_ids])

    def get_run(self, run_id: str) -> RunRecord | None:
        runs = self._select_runs("WHERE run_id = ?", [run_id])
        return runs[0] if runs else None

    def runs(self, grid: str | None = None) -> list[RunRecord]:
        """Every run (of one grid), newest first."""
        if grid is None:
            return self._select_runs("", [])
        return self._select_runs("WHERE grid = ?", [grid])

    def _select_runs(self, where: str, args: list) -> list[RunRecord]:
        with self.connect() as con:
            cur = con.execute(f"SELECT run_id, {', '.join(RUN_FIELDS)} FROM runs {where} "
                              "ORDER BY created_at DESC, run_id", args)
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
        return [RunRecord.from_row(row) for row in rows]

    def events_path_for(self, run_id: str) -> None:
        """A store keeps no events files of its own: the runner's default place serves."""
        return None

    def slots_dir(self):
        """Where runs into this store take their device slots (fragility_tui/slots.py):
        `<store>.slots` beside the file."""
        from fragility_tui.slots import slots_folder

        return slots_folder(self.path)
