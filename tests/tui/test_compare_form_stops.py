"""Compare in one go when its runs cannot bring the pair: both refused (exit 2, e.g. the grid
holds another item set), the pane says it stopped and why instead of waiting forever, and
stops looking for the grid they would have created; and the forms propose a new grid over
one that cannot take a run's cells: imported from other harnesses' logs, as over SYNTHETIC
and shipped grids."""

from __future__ import annotations

import subprocess
import sys

import pytest
from textual.widgets import Input

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.messages import CompareQueued
from fragility_tui.tui.panes.run_form import NEW_GRID, ComparePlan, proposed_grid

from .conftest import open_pane, screen_text, wait_ready
from .test_compare_form import open_compare_form

pytestmark = pytest.mark.anyio
REFUSED = ("error: --items: grid 'mine' holds another item set (item-set hash 0123456789ab…) "
           "than this run's items")


def refusing_launch(runs, tmp_path):
    """The Runs pane's launch, with a process that is refused as `run` is (exit 2, the
    reason on its log's last line) in place of `fragility-tui run`."""
    def launch(argv, what):
        log = tmp_path / f"run-{len(runs.launched)}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, "-c",
                                     "import time; time.sleep(1.5); "  # its imports
                                     f"print({REFUSED!r}); raise SystemExit(2)"],
                                    stdout=out, stderr=out)
        runs.launched.append((proc, log, what))
    return launch


async def test_compare_in_one_go_says_it_stopped_when_both_runs_are_refused(
        synthetic_store, tmp_path, monkeypatch):
    from fragility_tui.tui import compare_runs
    from fragility_tui.tui.panes import compare

    # the processes and the grid are looked for every 2 s: every 0.3 s here (the refused
    # processes still take 1.5 s), not ~4 s of the test's wall time spent idle
    monkeypatch.setattr(compare, "PROCESS_POLL_SECONDS", 0.3)
    monkeypatch.setattr(compare_runs, "AWAIT_GRID_SECONDS", 0.3)
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_pane(app, pilot, "8")
        runs = app.pane("runs")
        runs.launch = refusing_launch(runs, tmp_path)
        plan = ComparePlan("mine", "model-a", "model-b", ("run",), ("run",))
        app.post_message(CompareQueued(plan))
        await pilot.pause(0.2)
        assert "Compare in one go: waiting for the first cells" in \
            " ".join(screen_text(app).split())
        text = ""
        for _ in range(100):  # until the pane has looked at the ended processes
            await pilot.pause(0.1)
            text = " ".join(screen_text(app).split())
            if "stopped" in text:
                break
        assert "Compare in one go stopped: start model-a (compare A) failed (exit 2)" in text
        assert "holds another item set" in text and "waiting for" not in text
        assert pane.wanted == ("mine", "model-a", "model-b")
        for _ in range(100):  # one listing after both ended, then no more
            await pilot.pause(0.1)
            if app.compare_runs.awaited is None:
                break
        assert app.compare_runs.awaited is None


def test_an_imported_config_makes_the_forms_propose_a_new_grid():
    assert proposed_grid("g", set(), ["o0.letter", "lm-eval:arc_easy:acc+k0"]) == NEW_GRID
    assert proposed_grid("g", set(), ["o0.letter", "free-form-config"]) == NEW_GRID
    assert proposed_grid("g", set(), ["o0.letter", "o1.paren.lik", "cloze_qa+bos"]) == "g"
    assert proposed_grid("g", set(), []) == "g"  # its view not computed yet
    assert proposed_grid("g", {"g"}, ["o0.letter"]) == NEW_GRID


async def test_both_forms_propose_a_new_grid_over_an_imported_one(tmp_path, monkeypatch):
    from fragility_tui.store.importer import import_long_grid
    from fragility_tui.store.store import Store

    store = Store(tmp_path / "s.duckdb")
    for grid, configs in (("logs", ("o0.letter", "lm-eval:arc_easy:acc+k0")),
                          ("mine", ("o0.letter", "cloze_qa"))):
        rows = ["model,item,config,correct"] + [
            f"{m},q{i},{c},{(i + k) % 2}" for k, m in enumerate("ab") for i in range(20)
            for c in configs]
        (tmp_path / f"{grid}.csv").write_text("\n".join(rows) + "\n")
        import_long_grid(store, tmp_path / f"{grid}.csv", grid)
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "logs")
    app = FragilityApp(str(store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        assert app.grid_name == "logs"
        runs = await open_pane(app, pilot, "7")
        assert runs.query_one("#run-grid", Input).value == NEW_GRID
        form = await open_compare_form(app, pilot)
        assert form.query_one("#cf-grid", Input).value == NEW_GRID
        await pilot.press("escape")
        app.open_grid("mine")  # the user's own grid of runner configs: proposed
        await wait_ready(app, pilot)
        form = await open_compare_form(app, pilot)
        assert form.query_one("#cf-grid", Input).value == "mine"
        await pilot.press("escape")
        runs = await open_pane(app, pilot, "7")  # untouched, the run form's field follows
        assert runs.query_one("#run-grid", Input).value == "mine"
