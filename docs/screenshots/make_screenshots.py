"""Regenerate the README's SVG screenshots: .venv/bin/python docs/screenshots/make_screenshots.py DB

Opens the app headless at 120x40 on the given store, shows a few panes and saves each as
SVG next to this file.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
SHOTS = [("bands", "2"), ("pairs", "3"), ("compare", "8")]


async def main(db: str, grid: str) -> None:
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
            await app.workers.wait_for_complete()
            await pilot.pause(0.3)
            app.save_screenshot(filename=f"{grid}-{name}.svg", path=str(HERE))
            print(HERE / f"{grid}-{name}.svg")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "starter-real"))
