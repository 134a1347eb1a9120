"""The app on a grid without o0.letter (one imported from lm-eval's cloze samples): the
view is measured against the report's default reference, every pane opens, and the status
line names the reference."""

from __future__ import annotations

import numpy as np
import pytest

from fragility_tui.items.item import Item
from fragility_tui.store.store import CellRow, Store
from fragility_tui.tui.app import FragilityApp

from .conftest import open_pane, screen_text, wait_ready

pytestmark = pytest.mark.anyio


@pytest.fixture
def cloze_store(tmp_path):
    store = Store(tmp_path / "cloze.duckdb")
    store.create_grid("cloze-only")
    rng = np.random.default_rng(0)
    uids = [f"{'arc' if k < 10 else 'mmlu'}/q{k}" for k in range(20)]
    store.add_items("cloze-only", [Item(u, u.split("/")[0], None, f"question {k}?",
                                        ("a", "b", "c", "d"), 0) for k, u in enumerate(uids)])
    rows = [CellRow(f"m{m}", u, c, bool(rng.random() < skill), pred=0)
            for m, skill in enumerate((0.8, 0.6, 0.4)) for u in uids
            for c in ("cloze_qa", "cloze_bare")]
    store.write_cells("cloze-only", rows)
    return store


async def test_every_pane_works_against_the_fallback_reference(cloze_store):
    app = FragilityApp(str(cloze_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        assert app.view.report.grid.reference == "cloze_qa"
        assert "reference cloze_qa" in str(app.query_one("#status").render())
        for key in "12345678":
            await open_pane(app, pilot, key)
            assert not app.computing and app.view is not None
        assert "error" not in str(app.query_one("#status").render()).lower()
        assert "cloze-only" in screen_text(app)


async def test_pairs_and_model_drilldown_use_the_fallback_reference(cloze_store):
    from fragility_tui.tui.widgets import ReportTable

    app = FragilityApp(str(cloze_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "3")
        pairs = app.pane("pairs").query_one(ReportTable)
        labels = [v[-2] for _, v in pairs.all_rows]
        assert labels and all(label is not None and label.plain for label in labels)
        await open_pane(app, pilot, "2")
        await pilot.press("enter")
        await pilot.pause()
        configs = app.screen.query_one("#model-table", ReportTable)
        deltas = {v[0]: v[2] for _, v in configs.all_rows}
        assert deltas["cloze_qa"] == 0 and deltas["cloze_bare"] is not None
