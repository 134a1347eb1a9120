"""Small stores for the TUI tests, built with the store API in tmp_path."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from fragility_tui.store.importer import write_synthetic_grid
from fragility_tui.grid.simulate import simulate
from fragility_tui.store.store import Store
from helpers import built_once

SMALL = dict(n_models=4, n_items=40, seed=3)


def keep_calibrations(store: Store, grid: str, pairs: int | list, reference=None) -> None:
    """The grid's first `pairs` adjacent pairs (of its reference ranking), or the (a, b) pairs
    listed, calibrated into the store's cache, as the Pairs and Compare panes calibrate the
    pair they open on (on the default view, or under `reference`): ~1.5 CPU-s a pair on 4
    models x 40 items, which ~40 pilot tests spent again each; once per run in a template
    instead (built_once). The calibration line's own tests start without it
    (`uncalibrated_store`)."""
    from fragility_tui.analysis.pairs import adjacent_pairs
    from fragility_tui.services.reports import grid_calibration

    if isinstance(pairs, int):
        cube = store.load_cube(grid)
        pairs = [(cube.models[i], cube.models[j]) for i, j in adjacent_pairs(cube)][:pairs]
    done = grid_calibration(store, grid, pairs=pairs, reference=reference)
    assert done["cache"]["pairs_computed"] == len(pairs)


@pytest.fixture(scope="session")
def _synthetic_template(tmp_path_factory):
    def build(folder: Path) -> None:
        store = Store(folder / "tui.duckdb")
        write_synthetic_grid(store, simulate(**SMALL), "synthetic-small")
        keep_calibrations(store, "synthetic-small", pairs=2)

    return built_once(tmp_path_factory, "tui-synthetic", build) / "tui.duckdb"


@pytest.fixture
def synthetic_store(tmp_path, _synthetic_template):
    """A store of its own with one synthetic grid: 4 models × 40 items × 26 configs, its
    first two adjacent pairs calibrated (a copy of a file built once per session; the store
    keeps no file open between operations)."""
    path = tmp_path / "tui.duckdb"
    shutil.copyfile(_synthetic_template, path)
    return Store(path)


@pytest.fixture
def uncalibrated_store(synthetic_store):
    """synthetic_store with nothing in its calibration cache: the panes calibrate anew."""
    import duckdb

    with duckdb.connect(str(synthetic_store.path)) as con:
        con.execute("DELETE FROM calibration_cache")
    return synthetic_store


async def wait_while(app, pilot, busy, timeout: float, what: str) -> None:
    """Wait while busy() holds: on the app's unfinished workers, where there are any (woken
    when they end), else in 50 ms steps. Not by polling throughout: each poll wakes the app
    (every widget of the screen visited, the screen refreshed) and took a fifth of an app
    start's CPU from the workers being waited for (1.46 -> 1.16 CPU-s, scratch probe)."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while busy():
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise AssertionError(f"{what} after {timeout} s; status: "
                                 f"{app.query_one('#status').render()}")
        if any(not worker.is_finished for worker in app.workers):
            try:
                await asyncio.wait_for(wait_workers(app), remaining)
            except asyncio.TimeoutError:
                pass  # the deadline, said above
        else:
            await pilot.pause(0.05)


async def wait_ready(app, pilot, timeout: float = 30.0) -> None:
    """Wait until the app has computed its first view (workers finished)."""
    await wait_while(app, pilot, lambda: app.view is None or app.computing, timeout,
                     "app not ready")
    await wait_workers(app)
    await pilot.pause()


async def wait_workers(app) -> None:
    """Wait for every worker; a cancelled one is normal (an exclusive worker replaced by a
    newer one, e.g. a calibration when the full view lands), a failed one still raises."""
    from textual.worker import WorkerCancelled

    for worker in list(app.workers):
        try:
            await worker.wait()
        except WorkerCancelled:
            pass


async def wait_listed(app, pilot, timeout: float = 30.0) -> None:
    """Wait until the app has listed the store's grids (an empty store computes no view; the
    listing starts after the first frame, so a loaded machine may not have begun it yet)."""
    await wait_while(app, pilot, lambda: app.grids is None, timeout, "grids not listed")
    await app.workers.wait_for_complete()
    await pilot.pause()


def screen_lines(app) -> list[str]:
    """What the terminal shows, as text lines (the compositor's full update)."""
    update = app.screen._compositor.render_full_update()
    return ["".join(seg.text for strip in line for seg in strip if not seg.control)
            for line in update.strips]


def footer_and_status(app) -> tuple[str, str]:
    lines = screen_lines(app)
    return lines[-1], lines[-2]


def assert_footer_whole(app) -> None:
    """Every key label in the footer whole: `x Exp▏` and `q Qui▏` were cut."""
    footer = footer_and_status(app)[0]
    keys = footer.split("▏")[0]
    for label in re.findall(r"(?:^|  )\S+ (\S+(?: \S+)?)", keys):
        assert label.split()[0] in {"Sort", "Help", "Filter", "Selection", "Copy", "Export",
                                    "Quit", "Reload", "Back", "Plot/items", "Plot/table",
                                    "Compare", "Cancel", "Resume", "New"}, (label, footer)
    assert footer.rstrip().endswith("^p palette"), footer


def shown_footer_keys(app) -> int:
    """How many keys the footer shows (the ones past its width are hidden)."""
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    return sum(1 for key in app.screen.query_one(Footer).query(FooterKey) if key.display)


def screen_text(app) -> str:
    return "\n".join(screen_lines(app))


def terminal_bytes(app) -> str:
    """The exact sequence a real terminal would receive for the current screen."""
    return app.screen._compositor.render_full_update().render_segments(app.console)


async def open_pane(app, pilot, key: str, timeout: float = 30.0):
    """Press a pane's digit once the app is ready, wait until that pane is shown and its
    workers are done; returns the pane. The one way the pilot tests open a pane.

    Ready: the grids are listed and, where there is one, the open grid's view computed (a
    digit pressed earlier is honoured once its pane is composed, after the first frame, but
    the pane would show no view yet). The workers are waited for one by one: a pane's
    exclusive worker cancelled by its next run (the Runs pane's poll on a loaded machine) is
    normal, a failed one raises."""
    import asyncio

    from fragility_tui.tui.panes import PANES

    await wait_while(app, pilot, lambda: app.grids is None, timeout, "grids not listed")
    if app.grids:
        await wait_ready(app, pilot, timeout)
    pane_id = PANES[int(key) - 1].pane_id
    await pilot.press(key)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while app.query_one("#panes").current != pane_id:
        if loop.time() > deadline:
            raise AssertionError(f"pane {pane_id} not shown after {timeout} s")
        await pilot.pause(0.02)
    await wait_workers(app)
    await pilot.pause()
    return app.pane(pane_id)


async def walk_checks(app, pilot, *checks) -> None:
    """Walk checks that share one app session, in turn (issue 60: an app start and its first
    view cost ~0.9 s wall, 0.55 CPU-s; checks that leave no state the next one depends on
    need not each start their own). Each check is an async callable (app, pilot), a
    functools.partial for more arguments; a failed assertion is re-raised with its check's
    name in front, the original chained below it."""
    for check in checks:
        name = getattr(check, "__name__", None) or check.func.__name__
        try:
            await check(app, pilot)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from error


@pytest.fixture
def anyio_backend():
    """Async tests here run on asyncio (Textual's loop) through anyio's pytest plugin."""
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_grid_override(monkeypatch):
    """Tests choose their grid; a developer's FRAGILITY_TUI_GRID must not leak in."""
    monkeypatch.delenv("FRAGILITY_TUI_GRID", raising=False)


@pytest.fixture(autouse=True)
def _warm_launches(monkeypatch):
    """The app launches its runs and comparisons as processes forked from a server that has
    imported torch once (tests/cli_process.py): ~2.5 CPU-s less each, ~12 per session."""
    from cli_process import launch_detached

    monkeypatch.setattr("fragility_tui.tui.panes.runs.launch_detached", launch_detached)


@pytest.fixture(scope="session")
def _shipped_template(tmp_path_factory, samples_template):
    from fragility_tui.bootstrap import ensure_sample_grids

    def build(folder: Path) -> None:
        shutil.copyfile(samples_template, folder / "shipped.duckdb")  # the grids' loads: ~2 s
        store = Store(folder / "shipped.duckdb")
        assert ensure_sample_grids(store) == []  # as the app's first start leaves it
        keep_calibrations(store, "starter-real", pairs=1)  # ~4.5 CPU-s, opened in 4+ tests
        # the README tour's Compare pair, under both references it shows (~2.5 CPU-s each)
        tour_pair = [("smollm2-135m-instruct", "smollm2-135m-instruct+int4")]
        for reference in ("o0.letter", "cloze_qa"):
            keep_calibrations(store, "starter-real", tour_pair, reference=reference)

    return built_once(tmp_path_factory, "tui-shipped", build) / "shipped.duckdb"


@pytest.fixture
def shipped_store(tmp_path, _shipped_template):
    """A store of its own holding the shipped grids (synthetic-12x3679, starter-real), the
    first adjacent pair of starter-real calibrated."""
    path = tmp_path / "shipped.duckdb"
    shutil.copyfile(_shipped_template, path)
    return Store(path)
