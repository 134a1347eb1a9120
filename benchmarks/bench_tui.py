"""Timings of the Textual app (issue 5), run by `make bench`; a plain script, not a test.

On the simulated paper-size grid (12 models x 3,679 items x 26 configs) in a fresh store:
1. first paint: from constructing the app to the first full frame (header, pane bar,
   panes, footer) — goal < 1.5 s. The grid's statistics are computed off the UI thread
   after that; "first view" is when they are on screen (reported, no goal).
2. pane switch: the digit key's action (the pane fills its tables from the computed view on
   its first visit), layout and a full repaint, per pane — goal < 150 ms. Drill-downs
   (Enter) are timed too.

The app runs headless (Textual's pilot); a "paint" renders every line to the exact bytes a
terminal would receive. Usage: .venv/bin/python benchmarks/bench_tui.py [--strict]
(--strict exits 1 when a goal is missed; timings on a shared machine vary).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAPER = (12, 3679)
FIRST_PAINT_GOAL_S = 1.5
SWITCH_GOAL_S = 0.150
REPEATS = 3


def build_store(path: Path) -> str:
    from fragility_tui.grid.importer import write_synthetic_grid
    from fragility_tui.grid.simulate import simulate
    from fragility_tui.grid.store import Store

    store = Store(path)
    write_synthetic_grid(store, simulate(*PAPER, seed=0), "synthetic-paper")
    return str(store.path)


def paint(app) -> None:
    """Lay out the current screen and render every line to terminal bytes."""
    screen = app.screen
    screen._refresh_layout(screen.size)
    screen._compositor.render_full_update().render_segments(app.console)


async def measure(db: str) -> dict:
    from fragility_tui.tui.app import FragilityApp
    from fragility_tui.tui.panes import PANES

    started = time.perf_counter()
    app = FragilityApp(db)
    out: dict = {"first_visit": {}, "switch": {}, "drill": {}}
    async with app.run_test(size=(120, 40)) as pilot:
        paint(app)
        out["first_paint"] = time.perf_counter() - started
        while app.view is None:
            await pilot.pause(0.01)
        await pilot.pause()
        out["first_view"] = time.perf_counter() - started
        out["compute"] = app.last_compute_seconds
        for pane in PANES:  # first visit: the pane fills its tables from the computed view
            out["first_visit"][pane.title] = await switch(app, pilot, pane.pane_id)
        for pane in PANES:  # later visits: the pane is already filled
            out["switch"][pane.title] = statistics.median(
                [await switch(app, pilot, pane.pane_id) for _ in range(REPEATS)])
        for key in "234":  # Enter on the first row: model, pair, item drill-downs
            app.action_pane(PANES[int(key) - 1].pane_id)
            await pilot.pause()
            t0 = time.perf_counter()
            app.screen.focused.action_select_cursor()  # what Enter does on the table
            await pilot.pause()  # the screen is pushed and mounted by messages: wait for idle
            paint(app)
            out["drill"][PANES[int(key) - 1].title] = time.perf_counter() - t0
            await app.workers.wait_for_complete()
            await pilot.press("escape")
            await pilot.pause()
    return out


async def switch(app, pilot, pane_id: str) -> float:
    """Seconds for the digit key's action (pane refresh) plus layout and a full paint."""
    other = "grids" if pane_id != "grids" else "bands"
    app.action_pane(other)
    await pilot.pause()
    t0 = time.perf_counter()
    app.action_pane(pane_id)
    paint(app)
    seconds = time.perf_counter() - t0
    await pilot.pause()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        db = build_store(Path(tmp) / "bench.duckdb")
        print(f"store with {PAPER[0]} x {PAPER[1]:,} x 26 synthetic grid written in "
              f"{time.perf_counter() - t0:.1f} s")
        result = asyncio.run(measure(db))
    missed = []
    fp = result["first_paint"]
    print(f"first paint      {fp * 1000:7.0f} ms   (goal < {FIRST_PAINT_GOAL_S * 1000:.0f} ms)"
          f"{'' if fp < FIRST_PAINT_GOAL_S else '   MISSED'}")
    if fp >= FIRST_PAINT_GOAL_S:
        missed.append("first paint")
    print(f"first view       {result['first_view'] * 1000:7.0f} ms   (statistics computed off "
          f"the UI thread in {result['compute'] * 1000:.0f} ms; no goal)")
    for title, seconds in result["first_visit"].items():
        again = result["switch"][title]
        flag = "" if max(seconds, again) < SWITCH_GOAL_S else "   MISSED"
        if flag:
            missed.append(f"switch to {title}")
        print(f"switch {title:<11}{seconds * 1000:7.0f} ms first visit, {again * 1000:4.0f} ms "
              f"later (median of {REPEATS}; goal < {SWITCH_GOAL_S * 1000:.0f} ms){flag}")
    for title, seconds in result["drill"].items():
        print(f"enter in {title:<9}{seconds * 1000:7.0f} ms   (drill-down screen, until idle; no goal)")
    if missed:
        print("missed: " + ", ".join(missed))
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
