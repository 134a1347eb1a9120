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


def test_the_app_module_leaves_numpy_and_the_plots_for_after_the_first_frame():
    """The first frame needs Textual and the app only: numpy (through textual-plot, ~0.1 s
    of the first paint) loads when a pane with a plot is composed or a view is computed."""
    code = ("import sys; from fragility_tui.tui.entry import run_app; "
            "print(sorted(m for m in ('numpy', 'textual_plot', 'duckdb', 'scipy') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"
