"""The Compare pane shows nothing of a pair it no longer compares: a grid opened with one model
(or a blank or repeated pick) says "pick two different models" and clears the last pair's Δ̂
plot, its config ticks and its per-benchmark table."""

from __future__ import annotations

import pytest

from fragility_tui.grid.simulate import simulate
from fragility_tui.store.importer import write_synthetic_grid
from fragility_tui.tui.app import FragilityApp

from .conftest import open_pane, screen_text, wait_ready, wait_workers

pytestmark = pytest.mark.anyio


def plot_lines(app, plot) -> list[str]:
    r = plot.region
    return [line[r.x:r.right] for line in screen_text(app).splitlines()[r.y:r.bottom]]


async def test_a_one_model_grid_clears_the_last_pairs_plot(synthetic_store):
    write_synthetic_grid(synthetic_store, simulate(1, 30, 9), "solo")
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_pane(app, pilot, "8")
        await wait_workers(app)
        await pilot.pause(0.3)
        plot, table = pane.query_one("#compare-plot"), pane.query_one("#compare-table")
        assert any("●" in line for line in plot_lines(app, plot))
        assert table.row_count > 0
        app.open_grid("solo")
        await wait_ready(app, pilot)
        await pilot.press("8")
        await wait_workers(app)
        await pilot.pause(0.3)
        assert app.view.grid == "solo"
        assert "pick two different models" in screen_text(app)
        drawn = "\n".join(plot_lines(app, plot))
        assert not any(mark in drawn for mark in ("●", "o1", "o5", "Δ̂")), drawn
        assert table.row_count == 0
        app.open_grid("synthetic-small")  # a pair again: drawn in full, ticks and all
        await wait_ready(app, pilot)
        await wait_workers(app)
        await pilot.pause(0.3)
        drawn = "\n".join(plot_lines(app, plot))
        assert all(mark in drawn for mark in ("●", "o1", "o5", "Δ̂")), drawn
