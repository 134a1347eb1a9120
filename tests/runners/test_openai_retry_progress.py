"""Issue 57 item 5: a served run says when a request is being retried, and why. The client
tells the run (`on_retry`, a callback it stays usable without) before each retry's wait and
once a retried request is answered; the run writes `request_retry` / `request_recovered`
events, the CLI's live line shows "retrying ..." until the request is answered, and the app's
Runs pane (processes.run_progress) shows it in the run's status while it lasts."""

from __future__ import annotations

import io
import json
import os

import pytest

pytest.importorskip("torch")

from fake_openai import FakeOpenAI  # noqa: E402
from fragility_tui.processes import process_start, run_progress, tail_state  # noqa: E402
from fragility_tui.store.runs import RunRecord  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from fragility_tui.tui.panes.runs import status_text  # noqa: E402
from runners.backends.openai.client import OpenAIClient, RetryNotice  # noqa: E402
from runners.run.events import Display, read_events  # noqa: E402
from runners.run.loop import Run  # noqa: E402
from test_openai_backend import served_spec, weights  # noqa: E402,F401
from test_run_loop import cells_of, write_items  # noqa: E402

BODY = {"model": "m", "prompt": "The", "max_tokens": 1}
KEY = "sk-retry-progress-0123456789"
CONFIGS = ["o0.letter", "o1.letter"]


def served_run(server, items, store, tmp_path, grid):
    """A served run with the live (`full`) display written to a buffer."""
    spec = served_spec(server, items, grid=grid, configs=CONFIGS,
                       options={"api_key_env": "RETRY_TEST_KEY"})
    run = Run(spec, store, events_path=str(tmp_path / f"{grid}.jsonl"), display="none")
    run.display = Display("full", stream=io.StringIO())
    run.execute()
    return run


def test_a_503_then_200_is_told_on_the_progress_line_and_the_run_completes(
        weights, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("RETRY_TEST_KEY", KEY)
    items = write_items(tmp_path / "items.jsonl", 2)
    plain, retried = Store(tmp_path / "plain.duckdb"), Store(tmp_path / "retried.duckdb")
    with FakeOpenAI(*weights, key=KEY) as server:
        served_run(server, items, plain, tmp_path, "plain")
    # POST 1 is the start-up generation; POST 3 is one of the run's four requests
    with FakeOpenAI(*weights, key=KEY, fail_at={3}, fail_status=503, retry_after="0.2",
                    fail_says=f"overloaded (key {KEY})") as server:
        run = served_run(server, items, retried, tmp_path, "retried")
    assert server.failed == 1

    events = read_events(tmp_path / "retried.jsonl")
    retry = [e for e in events if e["event"] == "request_retry"]
    assert len(retry) == 1, events
    retry = retry[0]
    assert retry["reason"] == "server said HTTP 503: overloaded (key [api key])"
    assert (retry["attempt"], retry["attempts"], retry["delay_s"]) == (2, 6, 0.2)
    assert retry["model"] == "tiny-served" and retry["request"].startswith("item toy/q")
    assert ", config o" in retry["request"]
    answered = [e for e in events if e["event"] == "request_recovered"]
    assert [(e["request"], e["attempt"]) for e in answered] == [(retry["request"], 2)]
    assert KEY not in (tmp_path / "retried.jsonl").read_text()

    # the live line: the retry shown in place, then the progress line again
    frames = [f for f in run.display.stream.getvalue().split("\r\x1b[2K") if f]
    shown = next(k for k, f in enumerate(frames) if f.startswith("retrying"))
    assert frames[shown] == (f"retrying {retry['request']} in 0.2 s: server said HTTP 503: "
                             "overloaded (key [api key]) (attempt 2 of 6)")
    assert frames[shown + 1].startswith("[") and "cells" in frames[shown + 1]
    assert not any("retrying" in f for f in frames[shown + 1:])
    assert KEY not in run.display.stream.getvalue()

    # the run completed, its cells those of a run that was never turned away
    assert run.run_id and retried.get_run(run.run_id).status == "finished"
    assert cells_of(retried, "retried") == cells_of(plain, "plain")
    assert len(cells_of(retried, "retried")) == 2 * len(CONFIGS)


def test_the_client_tells_a_time_out_and_works_without_a_listener(weights):  # noqa: F811
    told = []
    with FakeOpenAI(*weights, stall_first=1, stall_s=1.5) as server:
        client = OpenAIClient(server.url, backoff=0.01, timeout=0.5)
        client.on_retry = told.append
        assert client.post("completions", BODY, label="item toy/q1, config o0.letter")
    assert [n.recovered for n in told] == [False, True]
    assert told[0].request == "item toy/q1, config o0.letter"
    assert told[0].reason.startswith("timed out: no whole answer within 0.5 s")
    assert (told[0].attempt, told[0].attempts) == (2, 2)  # a time-out is retried once
    assert told[0].event == "request_retry" and told[1].event == "request_recovered"
    assert told[1].fields() == {"request": "item toy/q1, config o0.letter", "attempt": 2}

    def broken(notice: RetryNotice):
        raise RuntimeError("a listener that fails")

    with FakeOpenAI(*weights, fail_first=1, fail_status=429) as server:
        client = OpenAIClient(server.url, backoff=0.01)
        client.on_retry = broken  # what it raises never fails the request
        assert client.post("completions", BODY)
        client = OpenAIClient(server.url, backoff=0.01)  # no listener at all
        assert client.post("completions", BODY) and client.retried == 0


def _line(**fields) -> str:
    return json.dumps({"run_id": "r", **fields}) + "\n"


RETRY = dict(event="request_retry", model="m", request="item toy/q1, config o0.letter",
             attempt=2, attempts=6, delay_s=2.0, reason="server said HTTP 503: busy")
BATCH = dict(event="batch", model="m", cells_done=1, cells_total=4, tokens_per_s=1.0,
             eta_s=3.0)


def test_the_runs_pane_shows_a_retry_while_it_lasts_and_skips_a_bad_line(tmp_path):
    path = tmp_path / "e.jsonl"
    running = RunRecord("r", status="running", events_path=str(path), pid=os.getpid(),
                        pid_started=process_start(os.getpid()), cells_total=4)
    path.write_text(_line(**BATCH) + _line(**RETRY))
    progress = run_progress(running)
    assert progress.retrying == ("retrying item toy/q1, config o0.letter in 2.0 s: server said "
                                 "HTTP 503: busy (attempt 2 of 6)")
    assert progress.done == 1 and progress.eta == 3.0
    shown = status_text(progress.status, retrying=progress.retrying).plain
    assert shown.startswith("running: retrying item toy/q1")
    # a finished run shows no retry, whatever its log says
    assert run_progress(RunRecord("r", status="finished", events_path=str(path))).retrying \
        is None

    # answered: the status is plain again; so it is once the next batch is committed
    path.write_text(_line(**BATCH) + _line(**RETRY) + _line(
        event="request_recovered", model="m", request=RETRY["request"], attempt=2))
    assert run_progress(running).retrying is None
    path.write_text(_line(**RETRY) + _line(**dict(BATCH, cells_done=2)))
    assert run_progress(running).retrying is None and run_progress(running).done == 2

    # a NaN, a missing field, a list for the request: skipped, not a crash; the good one
    # before them still shows
    bad = [dict(RETRY, delay_s=float("nan"), request="item q2, config o0.letter"),
           {k: v for k, v in RETRY.items() if k != "attempt"},
           dict(RETRY, request=["item q3"]),
           dict(RETRY, attempts=float("inf"), request="item q4, config o0.letter"),
           {"event": "request_recovered", "request": RETRY["request"]}]
    path.write_text(_line(**BATCH) + _line(**dict(RETRY, request="item q9, config o1.letter"))
                    + "".join(_line(**b) for b in bad))
    event, retrying = tail_state(str(path))
    assert event.cells_done == 1 and retrying.request == "item q9, config o1.letter"
    assert run_progress(running).retrying.startswith("retrying item q9")
