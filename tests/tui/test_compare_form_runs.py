"""Compare in one go for real (issue 22, item 4): the Compare form at 80×24 starts two
`fragility-tui run` processes of two tiny random Llamas (tests/runners/tiny_models.py) on the
CPU with one CPU slot; the second waits as queued behind the first, both finish, and the
Compare pane, opened on a grid the first run creates, shows the pair."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from textual.widgets import Input, Select  # noqa: E402

from fragility_tui.store.runs import RunStatus  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from fragility_tui.tui.app import FragilityApp  # noqa: E402

from helpers import pause_outside_the_store  # noqa: E402

from .conftest import screen_text  # noqa: E402
from .test_compare_form import open_compare_form  # noqa: E402
from .test_runs_pane import tiny_model_folder, write_items  # noqa: E402,F401

pytestmark = pytest.mark.anyio


async def test_both_runs_queue_on_one_slot_and_compare_opens_on_the_pair(
        synthetic_store, tmp_path, tiny_model_folder, monkeypatch):
    monkeypatch.setenv("FRAGILITY_CPU_SLOTS", "1")  # the runs inherit it: one CPU run at once
    a = shutil.copytree(tiny_model_folder, tmp_path / "tiny-a")
    b = shutil.copytree(tiny_model_folder, tmp_path / "tiny-b")
    items = write_items(tmp_path / "items.jsonl")
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_compare_form(app, pilot)
        for field, value in (("model-a", str(a)), ("model-b", str(b)), ("items", str(items)),
                             ("sample", "12"), ("configs", "o0.letter,cloze_qa"),
                             ("grid", "pair")):
            form.query_one(f"#cf-{field}", Input).value = value
        form.query_one("#cf-device", Select).value = "cpu"
        await pilot.pause()
        await pilot.click("#cf-start")
        statuses: set[tuple] = set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 300
        paused, resumed = None, False
        try:
            while True:
                await pilot.pause(0.25)
                runs = {r.model: r for r in Store(synthetic_store.path).runs("pair")}
                statuses.add(tuple(sorted(str(r.status) for r in runs.values())))
                running = [r for r in runs.values() if r.status == RunStatus.RUNNING]
                if paused is None and running and not any(
                        r.status in RunStatus.final() for r in runs.values()):
                    # Held (with the slot) until the other process has asked for the slot and
                    # waited: a fast machine finishes this small run before the second one
                    # even asks. Not until the other's row says `queued`: a run's row is
                    # created queued, before it asks (the row alone once let the holder go
                    # and finish first: no wait, no `queued` event).
                    paused = running[0].pid
                    pause_outside_the_store(paused, synthetic_store.path)
                    hold_until = loop.time() + 120
                if paused and not resumed and (
                        any(_waited(r) for r in runs.values() if r.pid != paused)
                        or loop.time() > hold_until):
                    os.kill(paused, signal.SIGCONT)
                    resumed = True
                if len(runs) == 2 and all(r.status in RunStatus.final() for r in runs.values()):
                    break
                if loop.time() > deadline:
                    raise AssertionError(f"runs did not finish: {runs}; {screen_text(app)}")
        finally:
            if paused and not resumed:
                os.kill(paused, signal.SIGCONT)
        assert {r.status for r in runs.values()} == {RunStatus.FINISHED}, runs
        # one of the two waited for the CPU slot the other held, and said which run held it
        queued = [e for r in runs.values() for e in map(json.loads,
                  open(r.events_path).read().splitlines()) if e.get("event") == "queued"]
        assert len(queued) >= 1, statuses
        waiter = queued[0]["run_id"]
        holder = next(r.run_id for r in runs.values() if r.run_id != waiter)
        assert queued[0]["message"] == f"waiting for cpu, held by run {holder}"
        # Compare opened the grid the first run made and picked the pair once both had cells
        pane = app.pane("compare")
        for _ in range(600):  # the pair's view is built in a worker after the grid opens
            await pilot.pause(0.1)
            shown = " ".join(screen_text(app).split())
            if app.grid_name == "pair" and "A tiny-a vs B tiny-b" in shown \
                    and "provisional" not in shown:
                break
        assert app.grid_name == "pair" and app.query_one("#panes").current == "compare"
        assert (pane.query_one("#compare-a").value, pane.query_one("#compare-b").value) == (
            "tiny-a", "tiny-b")
        assert "A tiny-a vs B tiny-b" in shown and "waiting" not in shown, shown


def _waited(run) -> bool:
    """The run's event log says it waited for the slot."""
    try:
        lines = open(run.events_path).read().splitlines()
    except (OSError, TypeError):  # not written yet
        return False
    for line in lines:
        try:
            if json.loads(line).get("event") == "queued":
                return True
        except ValueError:  # the line being written
            continue
    return False
