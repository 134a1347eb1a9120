"""Issue 47 item 3: a served run is bounded in time and can be stopped. A request has a
whole-request deadline (a server trickling one byte at a time is cut off and the error
names the time-out), an answer has a size cap, a 64 KB answer is cut in bounded time, and a
stop shuts the requests in flight so the process exits within seconds (SIGTERM: the run is
`cancelled`, resumable)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
from functools import partial

import pytest

pytest.importorskip("torch")

from fake_openai import FakeOpenAI  # noqa: E402
from fragility_tui.harness.parser import is_decided  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from cli_process import cli_popen, cli_run  # noqa: E402
from helpers import REPO  # noqa: E402
from runners.backends.openai.client import (OpenAIClient, RequestsCancelled,  # noqa: E402
                                            ServerError)
from runners.backends.openai.protocol import cut  # noqa: E402
from test_openai_backend import weights  # noqa: E402,F401
from test_run_loop import write_items  # noqa: E402

BODY = {"model": "m", "prompt": "The", "max_tokens": 1}


def within(seconds: float, work):
    """work()'s result or exception, or AssertionError if it takes longer than `seconds`."""
    out = []

    def target():
        try:
            out.append(("ok", work()))
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out.append(("raised", exc))
    thread = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert out, f"still running after {seconds} s"
    return out[0], time.monotonic() - started


def test_a_trickling_server_is_cut_off_by_the_whole_request_deadline(weights):  # noqa: F811
    with FakeOpenAI(*weights, trickle_s=0.1) as server:  # ~400 bytes: 40 s per answer
        client = OpenAIClient(server.url, timeout=1.0, retries=1, backoff=0.01)
        (kind, value), seconds = within(20, lambda: client.post("completions", BODY))
    assert kind == "raised" and isinstance(value, ServerError), value
    assert "timed out" in str(value) and "--request-timeout" in str(value)
    assert seconds < 6


def test_an_answer_over_the_cap_is_refused(weights):  # noqa: F811
    with FakeOpenAI(*weights, answer_text="B" * 5000) as server:
        client = OpenAIClient(server.url, retries=0, max_answer_bytes=4096)
        with pytest.raises(ServerError, match="more than 4,096 bytes"):
            client.post("completions", BODY)


class Request:
    labels, options = ("A", "B", "C", "D"), ("oxygen", "nitrogen", "carbon dioxide", "helium")
    decided = staticmethod(partial(is_decided, labels=labels, options=options))


def linear_cut(text: str) -> str | None:
    """The old cut: the shortest decided prefix, found by trying each."""
    for end in range(1, len(text) + 1):
        if not text[:end].endswith("\ufffd") and Request.decided(text[:end]):
            return text[:end]
    return None


def test_a_64_kb_answer_is_cut_in_bounded_time(tiny_tokenizer):
    """One parse of 8 KB takes ~1 ms here; trying every prefix of 64 KB took minutes."""
    text = "hmm, " * 13100 + "so it is B) end"
    expected = text[:text.index("B)") + 2]
    assert linear_cut(text[-60:]).endswith("B)")  # what the one-by-one cut decides on
    (kind, value), seconds = within(60, lambda: cut(Request, text, "length"))
    assert kind == "ok" and value == (expected, "decided") and seconds < 10, (value, seconds)
    (kind, value), seconds = within(60, lambda: cut(Request, text, "length", tiny_tokenizer))
    assert kind == "ok" and value[1] == "decided" and seconds < 30, seconds


def test_the_bisected_cut_equals_the_one_by_one_cut():
    rng = random.Random(4)
    words = ["B", "B)", "answer", "is", "(C)", "carbon", "dioxide", "not", "A", "oxygen",
             "\n", ":", "The", "helium", "D."]
    for _ in range(60):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(20, 60))) * 2
        expected = linear_cut(text)
        got, why = cut(Request, text, "length")
        assert (got if why == "decided" else None) == expected, text


def test_a_stop_shuts_the_requests_in_flight(weights):  # noqa: F811
    stop = threading.Event()
    with FakeOpenAI(*weights, stall_first=99, stall_s=60) as server:
        client = OpenAIClient(server.url, concurrency=3)
        client.should_stop = stop.is_set
        threading.Timer(1.0, stop.set).start()
        (kind, value), seconds = within(
            15, lambda: client.map(lambda _: client.post("completions", BODY), [1, 2, 3, 4]))
        assert kind == "raised" and isinstance(value, RequestsCancelled), value
        deadline = time.monotonic() + 10
        while any(t.name.startswith("openai_") for t in threading.enumerate()) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [t.name for t in threading.enumerate() if t.name.startswith("openai_")]
    assert seconds < 6


def test_sigterm_ends_a_served_run_within_seconds_and_it_resumes(weights, tmp_path):  # noqa: F811
    items = write_items(tmp_path / "items.jsonl", 3)
    db, events = tmp_path / "s.duckdb", tmp_path / "ev.jsonl"
    with FakeOpenAI(*weights, stall_after=2, stall_s=120) as server:
        args = ["run", "--backend", "openai",
                "--base-url", server.url, "--served-model", server.model_id,
                "--configs", "o0.letter", "--items", str(items), "--per-benchmark", "0",
                "--grid", "g",
                "--batch-size", "1", "--events", str(events), "--db", str(db),
                "--display", "none"]
        proc = cli_popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.posts < 3:  # one cell stalls
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        assert server.posts >= 3
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        try:
            proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert time.monotonic() - sent < 15
        store = Store(db)
        [run] = store.runs()
        assert run.status == "cancelled", (run.status, run.error, proc.stderr.read())
        server.stall_after = None  # the server answers again: the run resumes to the end
        again = cli_run(["run", "--resume", run.run_id, "--db", str(db), "--display", "none"],
                        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert store.get_run(run.run_id).status == "finished"
    assert any(json.loads(line)["event"] == "cancelled" for line in open(events))


def test_request_timeout_must_be_positive(tmp_path):
    from helpers import run_cli

    proc = run_cli("run", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                   "--served-model", "m", "--grid", "g", "--request-timeout", "0",
                   db=tmp_path / "s.duckdb")
    assert proc.returncode == 2 and "--request-timeout must be a number of seconds" in proc.stderr


def test_a_transient_failure_during_the_probe_refuses_nothing(weights, tmp_path):  # noqa: F811
    """Issue 47 item 5: the probe's request turned away (429 after every retry) says nothing
    about the server's echo; the run is refused before its row, not finished without its
    cloze configs."""
    from fragility_tui.errors import InputError
    from runners.run.loop import Run, RunSpec

    items = write_items(tmp_path / "items.jsonl", 1)
    store = Store(tmp_path / "s.duckdb")
    with FakeOpenAI(*weights, fail_after=1, fail_status=429) as server:  # the hello passes
        spec = RunSpec(models=[], items=[str(items)], grid="g", per_benchmark=None,
                       threads=1, backend="openai", configs=["o0.letter", "cloze_qa"],
                       server={"base_url": server.url, "served_model": server.model_id,
                               "concurrency": 1, "endpoint": "completions"})
        with pytest.raises(InputError, match="echo probe got no answer.*HTTP 429"):
            Run(spec, store, display="none")
    assert not store.runs()


def test_a_time_out_is_retried_once_not_five_times(weights):  # noqa: F811
    """Issue 57 item 5: with the default retries a trickling server took 6 time-outs to
    fail a run (738 s at the default 120 s); a time-out is now retried once."""
    from runners.backends.openai.client import DEFAULT_RETRIES

    with FakeOpenAI(*weights, trickle_s=0.1) as server:
        client = OpenAIClient(server.url, timeout=1.0, retries=DEFAULT_RETRIES, backoff=0.01)
        (kind, value), seconds = within(30, lambda: client.post("completions", BODY))
    assert kind == "raised" and "timed out" in str(value) and "2 attempts" in str(value)
    assert seconds < 5  # two deadlines of 1 s and a back-off, not six
