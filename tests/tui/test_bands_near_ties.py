"""Issue 25 (2): the app shows, per model, how many fragile rows are fragile only through
near-tie cells (decided inside the run's rounding), beside the bands."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fragility_tui.analysis.classify import FRAGILE, classify
from fragility_tui.analysis.near_ties import near_tie_fragility
from fragility_tui.analysis.report import report_of
from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.widgets import ReportTable

from .conftest import open_pane, wait_ready

pytestmark = pytest.mark.anyio
COLUMN = "fragile only via near-ties"


def _mark_rounding_only_rows(store, grid: str, model: str, rows: int) -> list[str]:
    """Mark near_tie every cell of `rows` fragile rows of `model` that disagrees with the
    row's reference cell: those rows are then fragile only through near-tie cells."""
    cube = store.load_cube(grid)
    m = cube.models.index(model)
    fragile = np.flatnonzero(classify(cube).codes[m] == FRAGILE)[:rows]
    ref = cube.configs.index(cube.reference)
    with store.connect(write=True) as con:
        for i in fragile:
            for c in np.flatnonzero(cube.bits[m, i] != cube.bits[m, i, ref]):
                con.execute("UPDATE cells SET margin = 0.001, near_tie = true WHERE grid = ? "
                            "AND model = ? AND item_uid = ? AND config_id = ?",
                            [grid, model, cube.items[i], cube.configs[c]])
    return [cube.items[i] for i in fragile]


def test_a_selection_keeps_the_near_tie_mask_aligned(synthetic_store):
    grid = synthetic_store.list_grids()[0].name
    cube = synthetic_store.load_cube(grid)
    _mark_rounding_only_rows(synthetic_store, grid, cube.models[0], 3)
    mask = synthetic_store.near_tie_mask(grid, cube)
    marked = dataclasses.replace(cube, near_tie=mask)
    sub = marked.select(models=[cube.models[0]], configs=[cube.reference, "cloze_qa"])
    assert sub.near_tie.shape == sub.bits.shape
    assert (sub.near_tie == mask[:1][:, :, [cube.configs.index(cube.reference),
                                            cube.configs.index("cloze_qa")]]).all()
    # the report reads the cube's own mask when none is passed
    report = report_of(marked, seed=0, n_boot=50, n_random=50)
    assert report.near_ties[0].only_near_ties == 3
    assert [r.only_near_ties for r in report.near_ties] == [
        r.only_near_ties for r in near_tie_fragility(cube, mask)]


async def test_bands_counts_fragile_rows_only_near_ties_make(synthetic_store):
    grid = synthetic_store.list_grids()[0].name
    model = synthetic_store.load_cube(grid).models[1]
    _mark_rounding_only_rows(synthetic_store, grid, model, 4)
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "2")
        table = app.screen.query_one("#bands ReportTable", ReportTable)
        labels = [c.label for c in table.columns_spec]
        assert labels[-1] == COLUMN
        counts = {key: values[-1] for key, values in table.shown_rows}
        assert counts[model] == 4 and sum(counts.values()) == 4


async def test_bands_has_no_near_tie_column_without_margins(synthetic_store):
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "2")
        table = app.screen.query_one("#bands ReportTable", ReportTable)
        assert COLUMN not in [c.label for c in table.columns_spec]
