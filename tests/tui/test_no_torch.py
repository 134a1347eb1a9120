"""The TUI process never imports torch or transformers, even after visiting every pane and
drill-down (runs are separate processes). Checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from .conftest import SMALL

SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from fragility_tui.store.importer import write_synthetic_grid
    from fragility_tui.grid.simulate import simulate
    from fragility_tui.store.store import Store
    from fragility_tui.tui.app import FragilityApp

    def heavy():
        return sorted(m for m in ("torch", "transformers", "optimum") if m in sys.modules)

    async def main(db):
        write_synthetic_grid(Store(db), simulate({n_models}, {n_items}, 1), "g")
        app = FragilityApp(db)
        seen = {{}}
        async with app.run_test(size=(100, 30)) as pilot:
            while app.view is None:
                await pilot.pause(0.05)
            seen["start"] = heavy()
            for key in "12345678":
                await pilot.press(key)
                await app.workers.wait_for_complete()
                await pilot.pause()
            for key in "234":  # every drill-down: model, pair, item
                await pilot.press(key, "enter")
                await app.workers.wait_for_complete()
                await pilot.pause()
                await pilot.press("escape")
            await pilot.press("f1", "escape", "s", "escape")
            seen["after"] = heavy()
        print(json.dumps(seen))

    asyncio.run(main(sys.argv[1]))
""").format(**SMALL)


def test_tui_never_imports_torch_or_transformers(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "t.duckdb")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"start": [], "after": []}


FIRST_FRAME = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    import fragility_tui.tui.app as app_module
    from fragility_tui.tui.app import FragilityApp

    HEAVY = ("numpy", "textual_plot", "duckdb", "_duckdb", "scipy")  # _duckdb: the engine
    # what only the hidden panes, the run watcher's poll and the selection's checks need
    LATER = tuple(f"fragility_tui.tui.panes.{p}" for p in
                  ("bands", "pairs", "items", "axes", "compression", "runs", "compare")) + (
        "fragility_tui.processes", "fragility_tui.schemas.events", "fragility_tui.store.runs",
        "fragility_tui.harness.configs", "fragility_tui.grid.reference")
    seen = {"imported": sorted(m for m in HEAVY if m in sys.modules)}

    class FirstFrame(FragilityApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))

        def on_ready(self):
            seen["first frame"] = sorted(m for m in HEAVY if m in sys.modules)
            seen["later"] = sorted(m for m in LATER if m in sys.modules)
            self.exit()

    async def main(db):
        async with FirstFrame(db).run_test(size=(80, 24)) as pilot:
            await pilot.pause()
        print(json.dumps(seen))

    asyncio.run(main(sys.argv[1]))
""")


def test_the_first_frame_needs_neither_numpy_nor_the_plots(tmp_path):
    """The first frame needs Textual and the app only: numpy (~0.1 s of the first paint,
    through textual-plot or the drill-down screens), DuckDB and scipy load after it, when
    the store worker runs, a plot pane is composed or the keymap is checked; so do the
    seven hidden panes' modules and what they import (the run events' schema, the process
    helpers, the harness configs: ~40 ms of the first paint when the app imported them)."""
    proc = subprocess.run([sys.executable, "-c", FIRST_FRAME, str(tmp_path / "t.duckdb")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"imported": [], "first frame": [], "later": []}


def test_pane_names_match_their_classes():
    """The app composes its tabs and digit keys from `PANE_NAMES` before any pane but Grids
    is imported: each name must be its class's id and title, in digit-key order."""
    from fragility_tui.tui.panes import PANE_NAMES, PANES, pane_class

    assert [(p.pane_id, p.title, p.__name__) for p in PANES] == list(PANE_NAMES)
    assert all(pane_class(pane_id) is p for (pane_id, _, _), p in zip(PANE_NAMES, PANES))
