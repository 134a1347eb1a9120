"""Regenerate the README's SVG screenshots:

    .venv/bin/python docs/screenshots/make_screenshots.py DB [GRID] [MODEL_A,MODEL_B]

Opens the app headless at 120x40 on the given store, shows a few panes and saves each as
SVG next to this file; the Compare pane shows the given pair (default: its own choice, the
two best models).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
SHOTS = [("bands", "2"), ("pairs", "3"), ("compare", "8")]


async def main(db: str, grid: str, pair: list[str] | None) -> None:
    os.environ["FRAGILITY_TUI_GRID"] = grid
    from fragility_tui.tui.app import FragilityApp

    app = FragilityApp(db)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(600):
            if app.view is not None and not app.computing:
                break
            await pilot.pause(0.05)
        for name, key in SHOTS:
            await pilot.press(key)
            if name == "compare" and pair:
                from fragility_tui.tui.panes import ComparePane

                app.query_one(ComparePane).set_pair(*pair)
            await app.workers.wait_for_complete()
            await pilot.pause(0.3)
            app.save_screenshot(filename=f"{grid}-{name}.svg", path=str(HERE))
            print(HERE / f"{grid}-{name}.svg")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "starter-real",
                     sys.argv[3].split(",") if len(sys.argv) > 3 else None))
