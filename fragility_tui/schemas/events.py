"""A run's progress events as typed records: one JSON object a line, appended by the runner
(runners/run/events.py, the Ray launcher too) and read by the runner's display and the app
(fragility_tui/processes.py tails them for the Runs pane).

Every line has `event` (its kind), `run_id`, `time` (UTC ISO 8601) and `schema`: the
version of this layout, 1 (lines written before the field existed carry none and read as
1). Reading follows fields.py's rules: a missing field is None, an unknown one is kept in
`extra`, an unknown kind reads as a plain RunEvent (as Progress when it has `cells_done`),
and a list field holding another JSON type, or a count, rate or duration that is not a
finite number, is a SchemaError naming it. A retry event (`request_retry`,
`request_recovered`) without the fields its line is made of is a SchemaError too: a reader
skips the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fragility_tui.schemas.fields import (as_list, as_number, as_text, as_version, read_record,
                                          required)

EVENT_SCHEMA = 1


@dataclass(frozen=True)
class RunEvent:
    """The fields every event has; an event of a kind this version does not know."""

    event: Any = None  # its kind: started, batch, ...
    run_id: Any = None
    time: Any = None
    schema: int = EVENT_SCHEMA
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Progress(RunEvent):
    """An event that says how far the run is: started, batch, finished, cancelled, and one
    of a kind this version does not know that carries `cells_done`. Rates come with
    batches."""

    cells_done: Any = None
    cells_total: Any = None
    tokens_per_s: Any = None
    eta_s: Any = None


@dataclass(frozen=True)
class Started(Progress):
    grid: Any = None
    models: tuple = ()
    items: Any = None  # how many
    configs: tuple = ()
    events_path: Any = None
    resumed: Any = None


@dataclass(frozen=True)
class Batch(Progress):
    """A committed batch of cells (the Ray launcher's model is `all`)."""

    model: Any = None
    batch_cells: Any = None
    tokens: Any = None
    elapsed_s: Any = None


@dataclass(frozen=True)
class Ended(Progress):
    """finished or cancelled (the kind is `event`)."""

    tokens: Any = None
    seconds: Any = None


@dataclass(frozen=True)
class Queued(RunEvent):
    device: Any = None
    message: Any = None  # "waiting for cuda:1, held by run ..."


@dataclass(frozen=True)
class TakenOver(RunEvent):
    """A queued run taken over by the process that has its model loaded (handover)."""
    by_run: Any = None  # the run that process ran before
    pid: Any = None
    message: Any = None


@dataclass(frozen=True)
class ConfigsRefused(RunEvent):
    model: Any = None
    configs: tuple = ()
    reason: Any = None  # one line naming the configs and why


@dataclass(frozen=True)
class ModelLoaded(RunEvent):
    model: Any = None
    load_s: Any = None
    summary: Any = None
    reused: Any = None  # true: the weights an earlier run of this process loaded (compare)


@dataclass(frozen=True)
class ProbeFailed(RunEvent):
    """The start-up probe of packed scoring did not reproduce plain forwards."""

    model: Any = None
    tolerance: Any = None
    largest_difference: Any = None
    error: Any = None


@dataclass(frozen=True)
class OomRetry(RunEvent):
    model: Any = None
    batch_size: Any = None  # the item limit now
    batch_tokens: Any = None  # the token budget now


@dataclass(frozen=True)
class RequestRetry(RunEvent):
    """A served model's request failed and waits `delay_s` to be tried again (a time-out,
    a 429 or 5xx, a dropped connection): the progress line says so until the request is
    answered (`request_recovered`) or the next batch is committed."""

    model: Any = None
    request: Any = None  # what was asked: "item mmlu/0042, config o0.letter"
    attempt: Any = None  # the attempt about to be made: 2 for the first retry
    attempts: Any = None  # the most this request gets
    delay_s: Any = None  # the wait before it
    reason: Any = None  # why, the server's text redacted: "server said HTTP 503: busy"

    @property
    def line(self) -> str:
        """"retrying item mmlu/0042, config o0.letter in 2.0 s: server said HTTP 503:
        busy (attempt 2 of 6)" (untrusted text: shown through the sanitiser)."""
        return (f"retrying {self.request} in {self.delay_s:.1f} s: {self.reason} "
                f"(attempt {self.attempt:.0f} of {self.attempts:.0f})")


@dataclass(frozen=True)
class RequestRecovered(RunEvent):
    """A retried request was answered (on `attempt`)."""

    model: Any = None
    request: Any = None
    attempt: Any = None

    @property
    def line(self) -> str:
        return f"{self.request} answered on attempt {self.attempt:.0f}"


@dataclass(frozen=True)
class Failed(RunEvent):
    reason: Any = None


EVENT_TYPES: dict[str, type[RunEvent]] = {
    "started": Started, "batch": Batch, "finished": Ended, "cancelled": Ended,
    "queued": Queued, "taken_over": TakenOver, "configs_refused": ConfigsRefused, "model_loaded": ModelLoaded,
    "probe_failed": ProbeFailed, "oom_retry": OomRetry, "failed": Failed,
    "request_retry": RequestRetry, "request_recovered": RequestRecovered,
}

# Counts, rates and durations are computed with (progress bars, ETAs, formatted figures).
NUMBERS = ("cells_done", "cells_total", "tokens_per_s", "eta_s", "items", "batch_cells",
           "tokens", "elapsed_s", "seconds", "load_s", "tolerance", "largest_difference",
           "batch_size", "batch_tokens", "attempt", "attempts", "delay_s")
_READERS = {"schema": as_version, "models": as_list, "configs": as_list,
            **{name: as_number for name in NUMBERS}}
# The fields a kind's line is made of: a line without one is skipped, not half shown.
_KIND_READERS = {
    RequestRetry: {"request": required(as_text), "reason": required(as_text),
                   **{name: required(as_number) for name in ("attempt", "attempts",
                                                             "delay_s")}},
    RequestRecovered: {"request": required(as_text), "attempt": required(as_number)},
}


def read_event(line: Any, where: str = "event") -> RunEvent:
    """The typed event of one parsed JSON line (a dict)."""
    kind = line.get("event") if isinstance(line, dict) else None
    # str(): the Ray launcher passes its final RunStatus (a str enum) as the kind
    cls = EVENT_TYPES.get(str(kind)) if isinstance(kind, str) else None
    if cls is None:  # a newer kind: still progress when it says how far the run is
        cls = Progress if isinstance(line, dict) and "cells_done" in line else RunEvent
    return read_record(cls, line, where, {**_READERS, **_KIND_READERS.get(cls, {})})
