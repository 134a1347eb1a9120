"""Run records in the store: one row per `fragility-tui run` invocation (its spec, status,
process, progress and provenance), read back as a typed `RunRecord`. Mixed into Store, whose
`connect` they use; PartsStore (store/parts.py) produces the same records from its files."""

from __future__ import annotations

import dataclasses
import enum
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping

from fragility_tui.store.schema import JSON_RUN_FIELDS, RUN_FIELDS, utc_now


class RunStatus(str, enum.Enum):
    """queued -> running -> finished | cancelled | failed; cancelling while a cancel is
    pending; died: recorded as running but its process is gone (derived, never stored)."""

    QUEUED = "queued"
    RUNNING = "running"
    CANCELLING = "cancelling"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"
    DIED = "died"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def active(cls) -> tuple["RunStatus", ...]:
        """Statuses whose process should be alive."""
        return cls.RUNNING, cls.CANCELLING

    @classmethod
    def final(cls) -> tuple["RunStatus", ...]:
        return cls.FINISHED, cls.CANCELLED, cls.FAILED, cls.DIED


@dataclass(frozen=True)
class RunRecord:
    """One run as recorded. Fields are the runs table's columns in its order (run_id, then
    RUN_FIELDS), so `to_dict` is the row that `runs list --json` and the provenance export
    print; `spec` and `provenance` are parsed JSON ({} when absent). `status` is the text
    recorded (a RunStatus value, or whatever an imported grid carried)."""

    run_id: str
    grid: str | None = None
    model: str | None = None
    status: str | None = None
    pid: int | None = None
    pid_started: str | None = None
    created_at: Any = None
    started_at: Any = None
    ended_at: Any = None
    spec: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    events_path: str | None = None
    cells_total: int | None = None
    cells_done: int | None = None
    tokens: int | None = None
    seconds: float | None = None
    error: str | None = None
    device: str | None = None  # cpu | cuda:N: the device whose slot it holds or waits for
    note: str | None = None  # while queued: "waiting for cuda:1, held by run ..."

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RunRecord":
        """A record from a row of the runs table or a parts run file (keys other than the
        table's columns, e.g. a parts file's `models`, are left out)."""
        values = {k: row.get(k) for k in ("run_id", *RUN_FIELDS)}
        for k in JSON_RUN_FIELDS:
            value = values[k]
            values[k] = (json.loads(value) if isinstance(value, str) and value
                         else value if isinstance(value, dict) else {})
        return cls(**values)

    def to_dict(self) -> dict:
        """The row as plain data, keys in the table's order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def with_status(self, status: str) -> "RunRecord":
        return dataclasses.replace(self, status=status)


def new_run_id() -> str:
    return utc_now().strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


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
    def create_run(self, run: dict) -> str:
        """Record a new run from its known fields (others ignored); returns its run_id."""
        run_id = run.get("run_id") or new_run_id()
        fields = {k: run.get(k) for k in RUN_FIELDS}
        fields["created_at"] = fields["created_at"] or utc_now()
        fields["status"] = fields["status"] or RunStatus.QUEUED.value
        with self.connect(write=True) as con:
            _insert_run(con, run_id, fields)
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

    def delete_imported_runs(self, grid: str) -> None:
        """Drop the run rows imported with a grid's provenance (no pid), e.g. on replacing it."""
        with self.connect(write=True) as con:
            con.execute("DELETE FROM runs WHERE grid = ? AND pid IS NULL", [grid])

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
