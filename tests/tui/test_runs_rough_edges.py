"""Issue 24 (15): the Runs pane at the sizes people use — a long form error is shown whole,
and at 80×24 a run's progress and ETA are on screen."""

from __future__ import annotations

import json

import pytest

from fragility_tui.tui.app import FragilityApp

from .conftest import open_pane, screen_text

pytestmark = pytest.mark.anyio


async def open_runs(app, pilot):
    pane = await open_pane(app, pilot, "7")
    for _ in range(100):  # the pane's first poll
        if pane.main_table().row_count or pane.runs == []:
            break
        await pilot.pause(0.05)
    await pilot.pause()
    return pane


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_alias_error_is_shown_whole(synthetic_store, size):
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=size) as pilot:
        pane = await open_runs(app, pilot)
        pane.query_one("#run-model").value = "smollm2"  # not an alias, a file or a hub id
        pane.query_one("#run-grid").value = "mine"
        await pilot.pause()
        pane.query_one("#run-start").press()
        await pilot.pause()
        note = str(pane.query_one("#run-note").render())
        assert "is not an alias" in note and note.rstrip().endswith("org/name[@revision]")
        shown = " ".join(line.strip(" │") for line in screen_text(app).splitlines())
        assert "org/name[@revision]" in shown  # the end of the message, on screen


async def test_progress_and_eta_are_on_screen_at_80x24(synthetic_store, tmp_path):
    import os

    from fragility_tui.processes import process_start

    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({"cells_done": 520, "cells_total": 1040,
                                  "tokens_per_s": 812.5, "eta_s": 3725}) + "\n")
    run_id = synthetic_store.create_run({
        "grid": "synthetic-small", "model": "smollm2-135m-instruct+int4", "status": "running",
        "cells_done": 500, "cells_total": 1040,
        "spec": {"models": ["smollm2-135m-instruct+int4"], "items": ["x.jsonl"], "grid": "g"}})
    # a live process (this test's own), so the run shows as running, not died
    synthetic_store.update_run(run_id, pid=os.getpid(), pid_started=process_start(os.getpid()),
                               events_path=str(events))
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await open_runs(app, pilot)
        for _ in range(100):
            if pane.runs:
                break
            await pilot.pause(0.05)
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if run_id in line)
        assert "██████" in row, row  # half of a 12-cell bar
        assert "1h02m" in row, row  # fmt_eta(3725)


async def test_both_builds_are_told_apart_at_80x24(synthetic_store):
    """A long model name is cut in the middle, keeping the end that tells builds apart
    (`smollm2-135m-instruct+in` was all 80 columns showed of both)."""
    for build in ("int4", "int8"):
        model = f"smollm2-135m-instruct+{build}"
        synthetic_store.create_run({"grid": "synthetic-small", "model": model,
                                    "status": "finished", "cells_done": 1040,
                                    "cells_total": 1040,
                                    "spec": {"models": [model], "items": ["x.jsonl"],
                                             "grid": "synthetic-small"}})
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await open_runs(app, pilot)
        for _ in range(100):
            if pane.runs:
                break
            await pilot.pause(0.05)
        await pilot.pause()
        text = screen_text(app)
        assert "truct+int4" in text and "truct+int8" in text, text
