"""SVG snapshots of the main views at 120×40 and 80×24 (Textual is pinned in pyproject.toml,
so these are stable). Regenerate with `pytest tests/tui/test_snapshots.py --snapshot-update`
after a deliberate change, and look at the SVGs before committing them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fragility_tui.store.importer import write_synthetic_grid
from fragility_tui.grid.simulate import simulate
from fragility_tui.store.store import Store
from fragility_tui.tui.app import FragilityApp

from helpers import built_once

from .conftest import keep_calibrations, wait_while

WIDE, SMALL_TERM = (120, 40), (80, 24)


@pytest.fixture(scope="module")
def _snapshot_template(tmp_path_factory):
    def build(folder: Path) -> None:
        store = Store(folder / "snap.duckdb")
        write_synthetic_grid(store, simulate(6, 120, 5), "synthetic-demo")
        keep_calibrations(store, "synthetic-demo", pairs=1)  # the pair Pairs, Compare open on

    return built_once(tmp_path_factory, "tui-snapshots", build) / "snap.duckdb"


@pytest.fixture
def snapshot_db(tmp_path, _snapshot_template):
    """A private copy per test: the Runs pane and exports never touch the template."""
    path = tmp_path / "snap.duckdb"
    shutil.copyfile(_snapshot_template, path)
    return str(path)


def steps(*keys: str):
    """run_before: wait for the first view, then press keys, letting workers finish."""
    async def run(pilot):
        app = pilot.app
        await wait_while(app, pilot, lambda: app.view is None or app.computing, 60,
                         "app not ready")
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        await pilot.pause()
    return run


async def settle(pilot) -> None:
    """Let workers finish, and the workers they lead to (a pane's calibration line starts
    after the pane's first paint)."""
    app = pilot.app
    for _ in range(100):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            return


@pytest.mark.parametrize("size", [WIDE, SMALL_TERM], ids=["120x40", "80x24"])
def test_bands(snap_compare, snapshot_db, size):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=size, run_before=steps("2"))


@pytest.mark.parametrize("size", [WIDE, SMALL_TERM], ids=["120x40", "80x24"])
def test_pairs(snap_compare, snapshot_db, size):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=size, run_before=steps("3"))


def test_items_80x24(snap_compare, snapshot_db):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=SMALL_TERM,
                        run_before=steps("4"))


def test_item_drilldown_120x40(snap_compare, snapshot_db):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=WIDE,
                        run_before=steps("4", "down", "enter", "right", "right"))


def test_item_drilldown_80x24(snap_compare, snapshot_db):
    """All 26 configs of every model fit at 80 columns, one character per cell."""
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=SMALL_TERM,
                        run_before=steps("4", "down", "enter", "right", "right"))


def test_compare_120x40(snap_compare, snapshot_db):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=WIDE, run_before=steps("8"))


def test_axes_80x24(snap_compare, snapshot_db):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=SMALL_TERM,
                        run_before=steps("5"))


def test_help_80x24(snap_compare, snapshot_db):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=SMALL_TERM,
                        run_before=steps("f1"))


# ---------------------------------------------------------------- plots (textual-plot)
# At 80×24 a plot and its table are shown one at a time: g swaps them.
def plot_steps(*keys: str, toggle: bool):
    """steps(*keys), then (toggle) g with the focus in the pane, as a user's would be."""
    before = steps(*keys)

    async def run(pilot):
        await before(pilot)
        if toggle:
            pilot.app.screen.focus_next()  # the pane's first focusable: its table or picker
            pilot.app.active_pane().focus_main() if len(pilot.app.screen_stack) == 1 else None
            await pilot.press("g")
            await settle(pilot)
            await pilot.pause()
    return run


@pytest.mark.parametrize("size", [WIDE, SMALL_TERM], ids=["120x40", "80x24"])
def test_compression_plot(snap_compare, snapshot_db, size):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=size,
                        run_before=plot_steps("6", toggle=size == SMALL_TERM))


@pytest.mark.parametrize("size", [WIDE, SMALL_TERM], ids=["120x40", "80x24"])
def test_model_configs_plot(snap_compare, snapshot_db, size):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=size,
                        run_before=plot_steps("2", "enter", toggle=size == SMALL_TERM))


@pytest.mark.parametrize("size", [WIDE, SMALL_TERM], ids=["120x40", "80x24"])
def test_compare_plot(snap_compare, snapshot_db, size):
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=size,
                        run_before=plot_steps("8", toggle=size == SMALL_TERM))



def test_compare_plot_no_color_80x24(snap_compare, snapshot_db, monkeypatch):
    """NO_COLOR: the plot still reads (markers, bars and axes carry the meaning), and
    Textual's monochrome filter does not trip over the plot's unstyled segments."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=SMALL_TERM,
                        run_before=plot_steps("8", toggle=True))


def test_compare_form_80x24(snap_compare, snapshot_db):
    """The Compare form over the Compare pane (n), after Enter on the empty form: every
    field fits at 80×24 and the problems name their fields."""
    assert snap_compare(FragilityApp(snapshot_db), terminal_size=SMALL_TERM,
                        run_before=steps("8", "n", "enter"))
