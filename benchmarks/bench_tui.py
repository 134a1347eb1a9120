"""Timings of the Textual app (issues 5 and 14), run by `make bench`; a plain script, not a test.

1. first paint of the whole command, as a user sees it: `fragility-tui` started in a tmux
   pane (120 x 40), polled every 25 ms until the pane bar is on screen, then until the
   status line says "ready" — on a first start (an empty default store: the shipped grids
   load in the app's worker) and on a later start; median of 3. Goal < 0.5 s.
2. per grid, in-process (Textual's pilot, headless): grid open — from constructing the app to
   a ready Bands pane (store read + statistics in a worker) — and pane switches: the digit
   key's action (the pane fills its tables from the computed view on its first visit),
   layout and a full repaint, per pane — goal < 150 ms. Grids: the simulated paper size
   (12 x 3,679 x 26) and 100 x 20,000 x 26 (52 M cells; goal: open <= 10 s). Drill-downs
   (Enter) are timed on the paper-size grid.

A "paint" renders every line to the exact bytes a terminal would receive.
Usage: .venv/bin/python benchmarks/bench_tui.py [--skip-large] [--strict]
(--strict exits 1 when a goal is missed; timings on a shared machine vary). The 100 x 20,000
store is built once (~2 min) and kept in ~/.cache/fragility-tui/bench/.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.targets import Targets  # noqa: E402

PAPER = (12, 3679)
LARGE = (100, 20000)
FIRST_PAINT_GOAL_S = 0.5
OPEN_GOAL_S = 10.0  # the 100 x 20,000 grid, to a ready Bands pane
SWITCH_GOAL_S = 0.150
REPEATS = 3
BENCH_CACHE = Path.home() / ".cache" / "fragility-tui" / "bench"


def build_store(path: Path, shape: tuple[int, int], grid: str) -> str:
    from fragility_tui.store.importer import write_synthetic_grid
    from fragility_tui.grid.simulate import simulate
    from fragility_tui.store.store import Store

    store = Store(path)
    if shape == PAPER:
        write_synthetic_grid(store, simulate(*shape, seed=0), grid)
    else:
        _write_large(store, simulate(*shape, seed=0), grid)
    return str(store.path)


def _write_large(store, synthetic, grid: str) -> None:
    """52 M cells a model at a time (one Arrow table of all of them needs ~20 GB: making
    import and simulate scale is issue 11). The first model goes through the grid writer,
    the others are appended the same way, then the packed cube is written as import does."""
    import numpy as np
    import pyarrow as pa

    from fragility_tui.store.writer import GridContent, write_grid
    from fragility_tui.store.schema import cell_schema

    cube = synthetic.cube
    items_col = pa.array(list(cube.items))
    configs_col = pa.array(list(cube.configs))
    n_items, n_configs = len(cube.items), len(cube.configs)
    ii, cc = np.divmod(np.arange(n_items * n_configs), n_configs)

    def model_cells(m: int):
        n = len(ii)
        return pa.table({
            "grid": pa.array([grid] * n), "model": pa.array([cube.models[m]] * n),
            "item_uid": items_col.take(pa.array(ii)), "config_id": configs_col.take(pa.array(cc)),
            "correct": cube.bits[m].ravel(), "pred": pa.nulls(n, pa.int8()),
            "permutation": pa.nulls(n, pa.string()), "raw_output": pa.nulls(n, pa.string()),
            "scores": pa.nulls(n, pa.list_(pa.float64())), "tokens": pa.nulls(n, pa.int32()),
            "ms": pa.nulls(n, pa.float32()), "run_id": pa.nulls(n, pa.string())},
            schema=cell_schema())

    models = {m: ("synthetic", {"synthetic": True}) for m in cube.models}
    write_grid(store, GridContent(grid, synthetic.items, models, model_cells(0), synthetic=True,
                                  description="bench: 100 x 20,000 x 26"))
    with store.connect(write=True) as con:
        for m in range(1, len(cube.models)):
            con.register("_bench_cells", model_cells(m))
            con.execute("INSERT INTO cells BY NAME SELECT * FROM _bench_cells")
            con.unregister("_bench_cells")
        store.cache_cube(grid, con)


def large_store() -> str:
    path = BENCH_CACHE / f"tui-{LARGE[0]}x{LARGE[1]}.duckdb"
    if not path.exists():
        BENCH_CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        t0 = time.perf_counter()
        build_store(partial, LARGE, "synthetic-large")
        partial.rename(path)
        print(f"built the {LARGE[0]} x {LARGE[1]:,} x 26 store in {time.perf_counter() - t0:.0f} s "
              f"({path})")
    return str(path)


# ---------------------------------------------------------------- 1. the whole command
def whole_command_paint(env: dict, timeout: float = 120.0) -> tuple[float | None, float | None]:
    """Seconds from starting `fragility-tui` in a tmux pane to the pane bar on screen, and to
    "ready" on the status line."""
    name = f"bench-tui-{os.getpid()}"
    command = f"{Path(sys.executable).parent / 'fragility-tui'}"
    t0 = time.perf_counter()
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40", command],
                   check=True, env=env)
    painted = ready = None
    try:
        while time.perf_counter() - t0 < timeout and ready is None:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", name],
                                    capture_output=True, text=True).stdout
            now = time.perf_counter() - t0
            if painted is None and "1 Grids" in screen:
                painted = now
            if "· ready ·" in screen:
                ready = now
            time.sleep(0.025)  # each poll starts a process: more often would slow the app
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        time.sleep(0.5)  # the tmux server exits with its last session: let it go first
    return painted, ready


def bench_whole_command() -> dict | None:
    if shutil.which("tmux") is None:
        print("first paint (whole command): skipped, tmux is not installed")
        return None
    # as `make run` does: the app's bytecode is current, so the start does not compile it
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "fragility_tui")],
                   check=True)
    runs: dict[str, list] = {"first start": [], "later start": []}
    for _ in range(REPEATS):  # a first start needs a fresh home each time
        with tempfile.TemporaryDirectory() as home:
            env = {**os.environ, "XDG_DATA_HOME": home, "TERM": "xterm-256color"}
            env.pop("FRAGILITY_TUI_GRID", None)
            runs["first start"].append(whole_command_paint(env))
            runs["later start"].append(whole_command_paint(env))
    return {start: tuple(_median([r[k] for r in rs]) for k in (0, 1))
            for start, rs in runs.items()}


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# ---------------------------------------------------------------- 2. in-process, per grid
def paint(app) -> None:
    """Lay out the current screen and render every line to terminal bytes."""
    screen = app.screen
    screen._refresh_layout(screen.size)
    screen._compositor.render_full_update().render_segments(app.console)


async def measure(db: str, grid: str, drill: bool) -> dict:
    from fragility_tui.tui.entry import TerminalApp  # what `fragility-tui` runs
    from fragility_tui.tui.panes import PANES

    os.environ["FRAGILITY_TUI_GRID"] = grid
    started = time.perf_counter()
    app = TerminalApp(db)
    out: dict = {"first_visit": {}, "switch": {}, "drill": {}}
    async with app.run_test(size=(120, 40)) as pilot:
        paint(app)
        out["first_paint"] = time.perf_counter() - started
        while app.view is None:
            await pilot.pause(0.01)
        await pilot.pause()
        out["open"] = time.perf_counter() - started  # Bands ready (a big grid: first sections)
        while app.computing:
            await pilot.pause(0.01)
        await pilot.pause()
        out["complete"] = time.perf_counter() - started  # every statistic on screen
        out["compute"] = app.last_compute_seconds
        for pane in PANES:  # first visit: the pane fills its tables from the computed view
            out["first_visit"][pane.title] = await switch(app, pilot, pane.pane_id)
        for pane in PANES:  # later visits: the pane is already filled
            out["switch"][pane.title] = statistics.median(
                [await switch(app, pilot, pane.pane_id) for _ in range(REPEATS)])
        for key in "234" if drill else "":  # Enter on the first row: model, pair, item
            app.action_pane(PANES[int(key) - 1].pane_id)
            await pilot.pause()
            t0 = time.perf_counter()
            await pilot.press("enter")  # the screen is pushed and mounted by messages
            await pilot.pause()  # wait for idle
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
    parser.add_argument("--skip-large", action="store_true", help="skip the 100 x 20,000 grid")
    args = parser.parse_args()
    targets = Targets()

    def goal(name: str, seconds: float | None, limit: float) -> str:
        return "" if targets.check(name, seconds is not None and seconds < limit) else "   MISSED"

    whole = bench_whole_command()
    for start, (painted, ready) in (whole or {}).items():
        print(f"first paint, {start:<11} {_ms(painted)} (goal < {FIRST_PAINT_GOAL_S * 1000:.0f} ms)"
              f"{goal(f'first paint ({start})', painted, FIRST_PAINT_GOAL_S)}; ready "
              f"{_ms(ready)} (whole command in tmux, median of {REPEATS})")
    grids = [("12 x 3,679", PAPER)] + ([] if args.skip_large else [("100 x 20,000", LARGE)])
    with tempfile.TemporaryDirectory() as tmp:
        for label, shape in grids:
            if shape == PAPER:
                db, grid = build_store(Path(tmp) / "paper.duckdb", PAPER, "synthetic-paper"), \
                    "synthetic-paper"
            else:
                db, grid = large_store(), "synthetic-large"
            result = asyncio.run(measure(db, grid, drill=shape == PAPER))
            limit = OPEN_GOAL_S if shape == LARGE else float("inf")
            print(f"{label}: grid open {_ms(result['open'])} to a ready Bands pane"
                  f"{goal(f'open {label}', result['open'], limit)}, every statistic "
                  f"{_ms(result['complete'])} (computed off the UI thread in "
                  f"{_ms(result['compute'])}); in-process first paint "
                  f"{_ms(result['first_paint'])}")
            for title, seconds in result["first_visit"].items():
                again = result["switch"][title]
                flag = goal(f"switch to {title} ({label})", max(seconds, again), SWITCH_GOAL_S)
                print(f"  switch {title:<11}{_ms(seconds)} first visit, {_ms(again)} later "
                      f"(median of {REPEATS}; goal < {SWITCH_GOAL_S * 1000:.0f} ms){flag}")
            for title, seconds in result["drill"].items():
                print(f"  enter in {title:<9}{_ms(seconds)} (drill-down screen, until idle; no goal)")
    return targets.finish(args.strict)


def _ms(seconds: float | None) -> str:
    return "   —   " if seconds is None else f"{seconds * 1000:6,.0f} ms"


if __name__ == "__main__":
    sys.exit(main())
