"""The Runs pane end to end: start a run of a tiny in-process-built model from the form (a
detached `fragility-tui run` process), see its progress, cancel it, resume it, and see the
grid complete — all through the pane's keys."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from fragility_tui.store.store import Store  # noqa: E402
from fragility_tui.tui.app import FragilityApp  # noqa: E402
from fragility_tui.tui.panes.runs import COLUMNS  # noqa: E402

from helpers import pause_outside_the_store  # noqa: E402

from .conftest import open_pane  # noqa: E402

pytestmark = pytest.mark.anyio
TINY_MODELS = Path(__file__).resolve().parents[1] / "runners" / "tiny_models.py"
N_ITEMS, CONFIGS = 40, "o0.letter,o1.letter,cloze_qa"  # enough batches to cancel mid-run


@pytest.fixture(scope="module")
def tiny_model_folder(tmp_path_factory) -> Path:
    """A 2-layer random Llama and a BPE tokenizer trained in-process (tests/runners)."""
    spec = importlib.util.spec_from_file_location("tiny_models", TINY_MODELS)
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    tokenizer = fixtures.make_tokenizer()
    fixtures.make_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_items(path: Path, n: int = N_ITEMS) -> Path:
    rows = [{"id": f"q{i}", "benchmark": "toy", "subject": None,
             "question": f"Which number comes after {i}?",
             "choices": [str(i + 1), str(i + 2), str(i - 1), str(i * 7 + 3)], "gold": 0}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


async def until(pilot, predicate, what: str, timeout: float = 120.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        await pilot.pause(0.5)  # the pane polls the store and the events file every second
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            runs = pilot.app.pane("runs").runs
            raise AssertionError(f"timed out waiting for {what}; runs: {runs}")


@pytest.mark.starts_first
async def test_start_watch_cancel_resume_complete(tmp_path, tiny_model_folder):
    db = tmp_path / "runs.duckdb"
    Store(db)  # an empty store: the run creates its grid
    items = write_items(tmp_path / "items.jsonl")
    app = FragilityApp(str(db))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        pane = await open_pane(app, pilot, "7")
        for field, value in (("model", str(tiny_model_folder)), ("items", str(items)),
                             ("grid", "tiny"), ("configs", CONFIGS),
                             ("extra", "--batch-size 1 --threads 1")):
            pane.query_one(f"#run-{field}").value = value
        await pilot.click("#run-start")
        assert "process" in str(pane.query_one("#run-note").render())

        def running_with_progress():
            runs = pane.runs
            return runs and runs[0].status == "running" and runs[0].done > 0 and runs[0]

        # The run is paused at its first committed batch until the cancel is sent: the pane
        # polls every second and a fast machine finished the whole run (~2 s) between two
        # of its looks (a CI flake). The batch is read from the run's events file: a look
        # at the store for "running with cells" missed a run that wrote fast.
        held = pane.launched[-1][0]
        await _first_batch(db)
        pause_outside_the_store(held.pid, db)
        try:
            run = await until(pilot, running_with_progress, "progress")
            total = N_ITEMS * 3
            assert run.total == total and run.run.model.endswith("tiny-llama")
            table = pane.main_table()
            shown = table.current_values()
            named = dict(zip((c.label for c in COLUMNS), shown))
            assert table.row_count == 1 and named["status"].plain == "running"
            assert named["device"] == "cpu" and named["done"] == run.done
            assert named["total"] == total
            await pilot.press("k", "y")  # cancel the selected run, confirmed
            await until(pilot, lambda: Store(db).get_run(run.run.run_id).status == "cancelling",
                        "the cancel request")
        finally:
            os.kill(held.pid, signal.SIGCONT)
        run = await until(pilot, lambda: pane.runs[0].status == "cancelled" and pane.runs[0],
                          "cancelled")
        cancelled_at = run.done
        assert 0 < cancelled_at < total, "the run finished before the cancel reached it"

        await pilot.press("u", "y")  # resume it, confirmed
        run = await until(pilot, lambda: pane.runs[0].status == "finished" and pane.runs[0],
                          "finished")
        assert run.done == total

        await pilot.press("enter")  # the provenance card
        await pilot.pause()
        card = str(app.screen.query_one("#provenance").render())
        assert "tiny-llama" in card and "spec_version" in card
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        grid = next(g for g in app.grids if g.name == "tiny")
        assert grid.complete and grid.cells == total


async def _first_batch(db: Path, timeout: float = 120.0) -> None:
    """Once the store's run has logged a committed batch in its events file (looked at
    every 20 ms; the other test process's runs log into the same folder)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            runs = Store(db).runs()
        except Exception:  # noqa: BLE001 - the store busy with a write: look again
            runs = []
        for run in runs:  # its events_path is recorded once it runs
            path = Path(run.events_path or "")
            if path.is_file() and '"event": "batch"' in path.read_text(errors="replace"):
                return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no batch logged in {timeout} s: {Store(db).runs()}")


async def test_a_doomed_run_is_not_launched(tmp_path):
    """A mistyped model or a missing items file is an inline error: no process, no run row."""
    db = tmp_path / "runs.duckdb"
    Store(db)
    app = FragilityApp(str(db))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        pane = await open_pane(app, pilot, "7")
        for field, value in (("model", "smolm2-135m"), ("items", "no/such/items.jsonl"),
                             ("grid", "g")):
            pane.query_one(f"#run-{field}").value = value
        await pilot.click("#run-start")
        await pilot.pause()
        note = str(pane.query_one("#run-note").render())
        assert "is not an alias" in note and "no such file or folder" in note
    assert Store(db).runs() == []


async def test_a_run_refused_at_its_start_says_why_in_the_pane(tmp_path, tiny_model_folder):
    """A run the CLI refuses before it writes a run row (exit 2) shows the CLI's reason."""
    db = tmp_path / "runs.duckdb"
    Store(db)
    items = write_items(tmp_path / "items.jsonl")
    app = FragilityApp(str(db))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        pane = await open_pane(app, pilot, "7")
        for field, value in (("model", str(tiny_model_folder)), ("items", str(items)),
                             ("grid", "tiny"), ("extra", "--no-such-flag")):
            pane.query_one(f"#run-{field}").value = value
        await pilot.click("#run-start")
        note = await until(pilot, lambda: "failed" in str(pane.query_one("#run-note").render())
                           and str(pane.query_one("#run-note").render()), "the refusal",
                           timeout=60)
        assert "exit 2" in note and "--no-such-flag" in note
    assert Store(db).runs() == []


async def test_a_served_run_s_retry_shows_in_its_status_while_it_lasts(tmp_path):
    """Issue 57 item 5: a running run whose events say a request waits to be retried shows
    why in its status; once the request is answered the status is `running` again."""
    from fragility_tui.processes import process_start

    db, events = tmp_path / "runs.duckdb", tmp_path / "events.jsonl"
    line = lambda **fields: json.dumps({"run_id": "r1", **fields}) + "\n"  # noqa: E731
    request = "item toy/q3, config o0.letter"
    events.write_text(
        line(event="batch", model="m", cells_done=1, cells_total=4, tokens_per_s=2.0,
             eta_s=3.0)
        + line(event="request_retry", model="m", request=request, attempt=2, attempts=6,
               delay_s=2.0, reason="server said HTTP 503: busy")
        + line(event="request_retry", model="m", request="item toy/q4, config o0.letter",
               attempt=2, attempts=6, delay_s=float("nan"), reason="a NaN: skipped"))
    store = Store(db)
    store.create_run({"run_id": "r1", "grid": "g", "model": "m", "status": "running",
                      "pid": os.getpid(), "pid_started": process_start(os.getpid()),
                      "events_path": str(events), "cells_total": 4})
    app = FragilityApp(str(db))
    async with app.run_test(size=(160, 40)) as pilot:
        await app.workers.wait_for_complete()
        pane = await open_pane(app, pilot, "7")

        def status() -> str:
            values = pane.main_table().current_values()
            return values and dict(zip((c.label for c in COLUMNS), values))["status"].plain

        shown = await until(pilot, lambda: "retrying" in (status() or "") and status(),
                            "the retry in the status", timeout=20)
        assert shown == (f"running: retrying {request} in 2.0 s: server said HTTP 503: busy "
                         "(attempt 2 of 6)")
        with events.open("a") as fh:
            fh.write(line(event="request_recovered", model="m", request=request, attempt=2))
        assert await until(pilot, lambda: status() == "running", "the plain status",
                           timeout=20)
