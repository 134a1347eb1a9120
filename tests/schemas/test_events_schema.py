"""The run events schema (fragility_tui/schemas/events.py): what the runner writes reads back
typed, older and newer lines are tolerated, wrong types are named, and the app's progress
tail reads it."""

from __future__ import annotations

import io
import json

import pytest

from fragility_tui.processes import run_progress, tail_progress
from fragility_tui.schemas.events import (EVENT_SCHEMA, Batch, Ended, Progress, RunEvent,
                                          Started, read_event)
from fragility_tui.schemas.fields import SchemaError
from fragility_tui.store.runs import RunRecord
from runners.run.events import Display, EventLog, read_events

EMITTED = [
    ("started", dict(grid="g", models=["a"], items=3, configs=["o0.letter"], cells_total=6,
                     cells_done=0, events_path="e.jsonl", resumed=False)),
    ("queued", dict(device="cpu", message="waiting for cpu, held by run r")),
    ("configs_refused", dict(model="a", configs=["cloze_qa"], reason="a: cloze_qa refused")),
    ("model_loaded", dict(model="a", load_s=1.5, summary="fp32 on cpu")),
    ("probe_failed", dict(model="a", tolerance=1e-4, largest_difference=0.5, error=None)),
    ("batch", dict(model="a", cells_done=3, cells_total=6, batch_cells=3, tokens=30,
                   tokens_per_s=12.5, elapsed_s=3.2, eta_s=4.0)),
    ("oom_retry", dict(model="a", batch_size=4, batch_tokens=1024)),
    ("cancelled", dict(cells_done=3, cells_total=6, tokens=30, seconds=2.0)),
    ("failed", dict(reason="out of memory")),
    ("request_retry", dict(model="a", request="item toy/q1, config o0.letter", attempt=2,
                           attempts=6, delay_s=0.5, reason="server said HTTP 503: busy")),
    ("request_recovered", dict(model="a", request="item toy/q1, config o0.letter",
                               attempt=2)),
]


def test_every_event_the_runner_writes_reads_back_typed_with_nothing_unknown(tmp_path):
    log = EventLog(tmp_path / "e.jsonl", "r1")
    for kind, fields in EMITTED:
        log.emit(kind, **fields)
    log.close()
    lines = read_events(tmp_path / "e.jsonl")
    events = [read_event(line) for line in lines]
    assert [type(e).__name__ for e in events] == [
        "Started", "Queued", "ConfigsRefused", "ModelLoaded", "ProbeFailed", "Batch",
        "OomRetry", "Ended", "Failed", "RequestRetry", "RequestRecovered"]
    for e in events:
        assert e.schema == EVENT_SCHEMA and e.run_id == "r1" and e.time and e.extra == {}
    started, batch, ended = events[0], events[5], events[7]
    assert started.models == ("a",) and started.configs == ("o0.letter",)
    assert (batch.cells_done, batch.tokens_per_s, batch.eta_s) == (3, 12.5, 4.0)
    assert ended.event == "cancelled" and ended.seconds == 2.0


def test_a_line_written_before_the_schema_field_reads_as_version_1():
    event = read_event({"event": "batch", "run_id": "r", "cells_done": 1, "cells_total": 2})
    assert isinstance(event, Batch) and event.schema == 1 and event.tokens_per_s is None


def test_newer_kinds_and_fields_are_kept_not_refused():
    later = read_event({"event": "paused", "run_id": "r", "schema": EVENT_SCHEMA + 1, "why": 1})
    assert type(later) is RunEvent and later.extra == {"why": 1}
    moving = read_event({"event": "shard_done", "cells_done": 5, "cells_total": 9})
    assert type(moving) is Progress and moving.cells_done == 5
    started = read_event({"event": "started", "models": ["a"], "gpu_count": 2})
    assert isinstance(started, Started) and started.extra == {"gpu_count": 2}


@pytest.mark.parametrize("line, where", [
    ({"event": "started", "models": "a"}, "event.models"),
    ({"event": "configs_refused", "configs": {"cloze_qa": 1}}, "event.configs"),
    ({"event": "batch", "schema": "1"}, "event.schema"),
    ({"event": "batch", "cells_done": "3"}, "event.cells_done"),
    ({"event": "probe_failed", "tolerance": True}, "event.tolerance"),
    (["started"], "event"),
])
def test_a_field_of_the_wrong_type_is_an_error_naming_it(line, where):
    with pytest.raises(SchemaError) as caught:
        read_event(line)
    assert caught.value.where == where


def test_the_writer_refuses_a_field_of_the_wrong_type(tmp_path):
    log = EventLog(tmp_path / "e.jsonl", "r1")
    with pytest.raises(SchemaError, match="event.models"):
        log.emit("started", models="a")
    log.close()
    assert (tmp_path / "e.jsonl").read_text() == ""  # nothing half-valid was written


def test_the_display_reads_typed_events():
    from fragility_tui.store.runs import RunStatus

    out = io.StringIO()
    display = Display("plain", out)
    display.show({"event": "started", "run_id": "r", "grid": "g", "models": ["a", "b"],
                  "items": 3, "configs": ["o0.letter"], "cells_total": 6, "cells_done": 2})
    # the Ray launcher emits its final status as a RunStatus
    display.show({"event": RunStatus.FINISHED, "run_id": "r", "cells_done": 6,
                  "cells_total": 6, "tokens": 60, "seconds": 5.5})
    assert out.getvalue().splitlines() == [
        "run r: grid g, 2 model(s), 3 items x 1 configs; 2 of 6 cells already done; events: ",
        "run r finished: 6/6 cells, 60 tokens in 5.5 s"]


def test_the_progress_tail_takes_the_latest_progress_event(tmp_path):
    path = tmp_path / "e.jsonl"
    lines = [{"event": "batch", "run_id": "r", "cells_done": 3, "cells_total": 6,
              "tokens_per_s": 10.0, "eta_s": 3.0},
             {"event": "batch", "run_id": "r", "cells_done": [4], "cells_total": 6},
             {"event": "queued", "run_id": "r", "device": "cpu"},
             {"event": "started", "run_id": "r", "models": "not a list", "cells_done": 5}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"event": "ba')
    event = tail_progress(str(path))
    # the torn line, the queued event and the two lines of the wrong types are passed over
    assert isinstance(event, Batch) and (event.cells_done, event.eta_s) == (3, 3.0)
    path.write_text(json.dumps(lines[0]) + "\n" + json.dumps(
        {"event": "finished", "run_id": "r", "cells_done": 6, "cells_total": 6}) + "\n")
    assert isinstance(tail_progress(str(path)), Ended)
    progress = run_progress(RunRecord("r", status="finished", events_path=str(path),
                                      cells_total=6))
    assert (progress.done, progress.total, progress.tok_s, progress.eta) == (6, 6, None, None)
    assert tail_progress(None) is None and tail_progress(str(tmp_path / "none")) is None


def test_a_retry_event_without_its_fields_is_refused_when_written_and_skipped_when_read(
        tmp_path):
    retry = dict(model="a", request="item toy/q1, config o0.letter", attempt=2, attempts=6,
                 delay_s=0.5, reason="server said HTTP 503: busy")
    log = EventLog(tmp_path / "e.jsonl", "r1")
    for bad in (dict(retry, delay_s=float("nan")), dict(retry, attempt=None),
                {k: v for k, v in retry.items() if k != "reason"}, dict(retry, request=[1])):
        with pytest.raises(SchemaError):
            log.emit("request_retry", **bad)
    log.close()
    assert read_events(tmp_path / "e.jsonl") == []  # nothing half-written
    out = io.StringIO()
    Display("plain", stream=out).show({"event": "request_retry", "run_id": "r", **retry})
    assert out.getvalue() == ("retrying item toy/q1, config o0.letter in 0.5 s: server said "
                              "HTTP 503: busy (attempt 2 of 6)\n")
