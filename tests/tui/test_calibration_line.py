"""The calibration line of the Pairs and Compare panes: computed in a worker (the pane says
"calibrating…" meanwhile), the figures of `calibrate` for the selected pair under the two
scenarios it names (reproducibility at the observed gap; no gap with the harness kept), one
line at 80×24 and at 120×40, kept in the store."""

from __future__ import annotations

import asyncio
import threading

import duckdb
import pytest

from fragility_tui.services import reports
from fragility_tui.analysis.calibration import summary_line
from fragility_tui.store.store import Store
from fragility_tui.tui.app import FragilityApp

from .conftest import open_pane, screen_lines, wait_ready

pytestmark = pytest.mark.anyio


def expected(store_path, view, a, b) -> dict:
    return reports.grid_calibration(Store(store_path), view.grid, cube=view.cube,
                                    pairs=[(a, b)], seed=view.seed)["pairs"][0]


def assert_names_its_scenarios(line: str, null: str) -> None:
    """The line says which scenarios its two rates come from."""
    assert "obs" in line and "gap" in line.split("obs", 1)[1]  # at the observed gap
    assert "no gap" in line and null in line  # the null: exchangeable rows or harness kept


def line_text(app, widget_id: str) -> str:
    return str(app.query_one(f"#{widget_id}").render())


async def until(pilot, condition, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time: " + " | ".join(str(w.render()) for w in pilot.app.query("#pairs-calibration, #compare-calibration")))
        await pilot.pause(0.05)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_pairs_line_follows_the_cursor_and_fits(uncalibrated_store, size):
    app = FragilityApp(str(uncalibrated_store.path))
    async with app.run_test(size=size) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "3")
        pairs = app.view.report.pairs
        for k, pair in enumerate(pairs[:2]):
            if k:
                await pilot.press("down")
            await until(pilot, lambda: "reps" in line_text(app, "pairs-calibration")
                        or "replicates" in line_text(app, "pairs-calibration"))
            result = expected(uncalibrated_store.path, app.view, pair.a, pair.b)
            outcome = "manufactured" if pair.manufactured else pair.verdict
            width = size[0] - 2
            assert line_text(app, "pairs-calibration") == summary_line(result, outcome,
                                                                         width=width)
            shown = [line for line in screen_lines(app)
                     if "calibration (200" in line or "200 reps" in line]
            assert len(shown) == 1 and f"'{outcome}'" in shown[0]
            assert_names_its_scenarios(shown[0], "exch")
            assert len(shown[0].rstrip()) <= size[0]
            # the detail line under it says why the split cannot order the pair (item 7)
            detail = line_text(app, "pairs-detail")
            n = pair.a_only_stable + pair.b_only_stable
            assert detail.startswith("stable set: ")
            assert (pair.detail in detail) if pair.detail else (
                f"{n} stable disagreements" in detail)
            assert sum(detail[:40] in line for line in screen_lines(app)) == 1
        if size[0] == 120:
            assert "reproduced at the observed gap" in shown[0]
            assert "with no gap, rows exchanged" in shown[0]


async def test_compare_line_quotes_the_observed_label(uncalibrated_store):
    app = FragilityApp(str(uncalibrated_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "8")
        await until(pilot, lambda: "reps" in line_text(app, "compare-calibration"))
        a, b = (app.query_one(f"#compare-{x}").value for x in "ab")
        result = expected(uncalibrated_store.path, app.view, a, b)
        label = result["observed"]["labels"]["observed"]
        text = line_text(app, "compare-calibration")
        assert text == summary_line(result, label, "observed", width=78)
        assert f"observed '{label}'" in text
        assert_names_its_scenarios(text, "harness")
        rep = result["reproducibility_at_observed_gap"]["labels"]["observed"][label]
        null = result["false_alarms_harness_kept"]["labels"]["observed"][label]
        assert f"'{label}' {100 * rep['rate']:.0f}% at" in text
        assert f", {100 * null['rate']:.0f}% no gap" in text
        assert any(text in line for line in screen_lines(app))
    con = duckdb.connect(str(uncalibrated_store.path))
    kept = con.execute("SELECT a, b FROM calibration_cache").fetchall()
    con.close()
    assert tuple(sorted((a, b))) in kept  # computed once, kept in the store


async def test_the_line_says_calibrating_until_the_worker_is_done(uncalibrated_store, monkeypatch):
    release = threading.Event()
    real = reports.grid_calibration

    def slow(*args, **kwargs):
        release.wait(20)
        return real(*args, **kwargs)

    monkeypatch.setattr(reports, "grid_calibration", slow)
    app = FragilityApp(str(uncalibrated_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        while app.view is None or app.computing:
            await pilot.pause(0.05)
        await pilot.press("3")
        await until(pilot, lambda: line_text(app, "pairs-calibration") == "calibrating…")
        assert any("calibrating…" in line for line in screen_lines(app))
        await pilot.press("down")  # the pane stays responsive while the worker waits
        await pilot.pause()
        assert app.query_one("#pairs-table").cursor_row == 1
        release.set()
        await until(pilot, lambda: "reps" in line_text(app, "pairs-calibration"))
        pair = app.view.report.pairs[1]
        outcome = "manufactured" if pair.manufactured else pair.verdict
        assert f"'{outcome}'" in line_text(app, "pairs-calibration")


async def test_a_failed_calibration_says_so_instead_of_calibrating(uncalibrated_store,
                                                                    monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no room \x1b[31mleft")

    monkeypatch.setattr(reports, "grid_calibration", broken)
    app = FragilityApp(str(uncalibrated_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "8")
        await until(pilot, lambda: "failed" in line_text(app, "compare-calibration"))
        text = line_text(app, "compare-calibration")
        assert text.startswith("calibration failed: RuntimeError: no room") and "\x1b" not in text
        await open_pane(app, pilot, "3")
        await until(pilot, lambda: "failed" in line_text(app, "pairs-calibration"))
