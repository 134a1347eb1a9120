"""A run as recorded: one row per `fragility-tui run` invocation (its spec, status, process,
progress and provenance) as the typed `RunRecord` that Store (its SQL: store/run_table.py)
and PartsStore (store/parts.py, from its files) return, and its `RunStatus`. Plain data: the
app, the CLI and the runner read it without the store's SQL."""

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
    unreadable: str | None = None  # why its spec or provenance JSON could not be read

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RunRecord":
        """A record from a row of the runs table or a parts run file (keys other than the
        table's columns, e.g. a parts file's `models`, are left out)."""
        values = {k: row.get(k) for k in ("run_id", *RUN_FIELDS)}
        unreadable = []
        for k in JSON_RUN_FIELDS:
            value = values[k]
            try:
                value = json.loads(value) if isinstance(value, str) and value else value
            except (ValueError, RecursionError) as exc:  # one bad row, not every run's listing
                unreadable.append(f"{k}: {type(exc).__name__}: {str(exc)[:120]}")
                value = None
            values[k] = value if isinstance(value, dict) else {}
        return cls(**values, unreadable="; ".join(unreadable) or None)

    def to_dict(self) -> dict:
        """The row as plain data, keys in the table's order (and `unreadable`, not a column,
        only when a JSON field could not be read)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "unreadable" or self.unreadable is not None}

    def with_status(self, status: str) -> "RunRecord":
        return dataclasses.replace(self, status=status)

    @property
    def shown_device(self) -> str | None:
        """The device to show for the run: the slot it holds or held, else the device its
        provenance records (the shipped runs predate the slot column: `runs list` said `-`
        where `runs show` said `cpu`, issue 60)."""
        recorded = self.provenance.get("device") if isinstance(self.provenance, dict) else None
        return self.device or (recorded if isinstance(recorded, str) and recorded else None)


def new_run_id() -> str:
    return utc_now().strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
