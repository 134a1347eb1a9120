"""Run records in the store: one row per `fragility-tui run` invocation (its spec, status,
process, progress and provenance). Mixed into Store, whose `connect` they use."""

from __future__ import annotations

import json
import uuid

from fragility_tui.store.schema import JSON_RUN_FIELDS, RUN_FIELDS, utc_now


def new_run_id() -> str:
    return utc_now().strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


class RunRecords:
    def create_run(self, run: dict) -> str:
        run_id = run.get("run_id") or new_run_id()
        fields = {k: run.get(k) for k in RUN_FIELDS}
        fields["created_at"] = fields["created_at"] or utc_now()
        fields["status"] = fields["status"] or "queued"
        for k in JSON_RUN_FIELDS:
            if fields[k] is not None and not isinstance(fields[k], str):
                fields[k] = json.dumps(fields[k], sort_keys=True, default=str)
        with self.connect(write=True) as con:
            con.execute(f"INSERT INTO runs (run_id, {', '.join(RUN_FIELDS)}) VALUES "
                        f"({', '.join('?' * (len(RUN_FIELDS) + 1))})",
                        [run_id] + [fields[k] for k in RUN_FIELDS])
        return run_id

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

    def delete_imported_runs(self, grid: str) -> None:
        """Drop the run rows imported with a grid's provenance (no pid), e.g. on replacing it."""
        with self.connect(write=True) as con:
            con.execute("DELETE FROM runs WHERE grid = ? AND pid IS NULL", [grid])

    def delete_runs(self, run_ids: list[str]) -> None:
        """Forget run records (`runs delete`, `grids delete`); cells they wrote stay."""
        with self.connect(write=True) as con:
            con.executemany("DELETE FROM runs WHERE run_id = ?", [[r] for r in run_ids])

    def get_run(self, run_id: str) -> dict | None:
        runs = self._select_runs("WHERE run_id = ?", [run_id])
        return runs[0] if runs else None

    def list_runs(self, grid: str | None = None) -> list[dict]:
        if grid is None:
            return self._select_runs("", [])
        return self._select_runs("WHERE grid = ?", [grid])

    def _select_runs(self, where: str, args: list) -> list[dict]:
        with self.connect() as con:
            cur = con.execute(f"SELECT run_id, {', '.join(RUN_FIELDS)} FROM runs {where} "
                              "ORDER BY created_at DESC, run_id", args)
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
        for row in rows:
            for k in JSON_RUN_FIELDS:
                row[k] = json.loads(row[k]) if row[k] else {}
        return rows
