"""Live grids: a CLI run writing into the grid the app has open changes the header's item
count and the Bands figures while the run is still running (a `fragility-tui run`
subprocess of a tiny random Llama, tests/runners/tiny_models.py)."""

from __future__ import annotations

import asyncio
import os
import re
import signal

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from fragility_tui.grid.cube import Cube  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from fragility_tui.tui.app import FragilityApp  # noqa: E402
from fragility_tui.tui import live  # noqa: E402
from fragility_tui.tui.live import coverage, header_note, pair_coverage  # noqa: E402
from cli_process import cli_popen  # noqa: E402
from helpers import REPO, pause_outside_the_store, run_cli  # noqa: E402

from .conftest import open_pane  # noqa: E402
from .test_runs_pane import tiny_model_folder, write_items  # noqa: E402,F401

pytestmark = pytest.mark.anyio
# B's work: enough items and configs (three generation configs decode) that the run outlasts
# two of the app's reloads on a loaded 2-core CI machine. With 40 items and the app's own
# 3-second debounce, a CI run finished after one reload; the test shortens the debounce
# (what it checks is that reloads follow the run, not the debounce's length).
CONFIGS = "o0.letter,o1.letter,o2.letter,cloze_qa"
N_LIVE_ITEMS = 100


def test_coverage_marks_models_with_items_to_come():
    present = np.ones((2, 4, 3), dtype=bool)
    present[1, 2:] = False  # B has cells for 2 of 4 items
    cube = Cube(models=("A", "B"), items=tuple("wxyz"), configs=("o0.letter", "o1.letter",
                                                                  "cloze_qa"),
                bits=np.zeros((2, 4, 3), dtype=bool), present=present,
                benchmarks=np.array(["t"] * 4, dtype=object))
    a, b = coverage(cube)
    assert not a.provisional and b.provisional and b.label() == "provisional: 2 of 4 items"
    assert header_note(cube) == "provisional: B 2 of 4 items"
    assert pair_coverage(cube, "A", "B").label() == "provisional: 2 of 4 items"
    present[1] = True
    assert header_note(cube) == "" and pair_coverage(cube, "A", "B") is None


def header(app) -> str:
    return str(app.main_screen.query_one("#grid-header").render())


async def test_a_cli_run_fills_the_open_grid_while_it_runs(tmp_path, tiny_model_folder,
                                                          monkeypatch):
    monkeypatch.setattr(live, "POLL_SECONDS", 0.25)
    monkeypatch.setattr(live, "MIN_GAP_SECONDS", 1.0)
    db = tmp_path / "live.duckdb"
    items = write_items(tmp_path / "items.jsonl", N_LIVE_ITEMS)
    base = ["run", "--model", str(tiny_model_folder), "--items", str(items), "--grid", "live",
            "--threads", "1", "--display", "none", "--per-benchmark", str(N_LIVE_ITEMS)]
    # A: every item under one config (complete, so not provisional); B: four (CONFIGS)
    run_cli(*base, "--configs", "o0.letter", "--name", "tiny-a", db=db, check=True,
            timeout=300)
    app = FragilityApp(str(db))
    async with app.run_test(size=(120, 40)) as pilot:
        while app.view is None or app.computing:
            await pilot.pause(0.1)
        await open_pane(app, pilot, "2")
        assert "provisional" not in header(app)
        before = app.view.report.bands
        assert [b.band.model for b in before] == ["tiny-a"]
        log = open(tmp_path / "b.log", "wb")
        proc = cli_popen(
            [*base, "--configs", CONFIGS, "--name", "tiny-b", "--batch-size", "1", "--db",
             str(db)], stdout=log, stderr=log, cwd=REPO, env={**os.environ, "NO_COLOR": "1"})
        try:
            # Two different provisional counts, both seen mid-run. The run is paused
            # (outside the store) at each sighting and let go for a moment between them:
            # unpaused, a fast machine ran the last fifth of the items between two of the
            # app's refreshes (a CI flake).
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 240
            seen: list[str] = []
            nudged = None  # when the paused run was last let go for a moment
            while len(seen) < 2:
                await pilot.pause(0.25)
                text = header(app)
                found = re.search(r"provisional: tiny-b ([\d,]+ of [\d,]+) items", text)
                assert proc.poll() is None, \
                    f"the run ended before two live refreshes were seen: {seen}; " \
                    f"{(tmp_path / 'b.log').read_text()[-800:]}"
                assert loop.time() < deadline, f"no live refresh seen: {header(app)}"
                if found and found.group(1) not in seen:
                    seen.append(found.group(1))
                    pause_outside_the_store(proc.pid, db)
                    nudged = loop.time()
                elif nudged is not None and loop.time() - nudged > 1.5:  # the app looked
                    os.kill(proc.pid, signal.SIGCONT)
                    await asyncio.sleep(0.3)
                    pause_outside_the_store(proc.pid, db)
                    nudged = loop.time()
            counts = [int(s.split(" of ")[0].replace(",", "")) for s in seen]
            assert counts[0] < counts[1] < N_LIVE_ITEMS
            assert seen[-1].endswith(f" of {N_LIVE_ITEMS}")
            models = [b.band.model for b in app.view.report.bands]
            assert set(models) == {"tiny-a", "tiny-b"}  # the Bands figures moved mid-run
            bands = app.pane("bands")
            assert "tiny-b provisional:" in str(bands.query_one("#bands-provisional").render())
            assert "tiny-b" in bands.query_one("#band-chart").render().plain
        finally:
            proc.kill()
            proc.wait()
            log.close()


def test_a_band_with_undefined_figures_draws_what_it_has():
    """A model with cells still to come has no robust accuracy yet (None): its bar shows the
    range and markers it has instead of crashing the Bands pane."""
    from fragility_tui.tui.widgets import band_bar

    bar = band_bar(0.2, 0.6, 0.4, 0.5, None, 20).plain
    assert "▓" not in bar and "├" in bar and "●" in bar and "◆" in bar
    assert band_bar(None, None, None, None, None, 20).plain == " " * 20
