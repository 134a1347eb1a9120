"""The README's five-minute tour ("A five-minute tour: does my int4 build really lose?"),
walked at 80×24 on the shipped grids with the keys it names; each claim it makes is checked
against what the screen shows (or, where the figure sits in a scrolled widget, against what
that widget renders). Issue 24's acceptance."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.widgets import Select

from fragility_tui.tui.app import FragilityApp

from .conftest import open_pane, screen_text, wait_ready, wait_while

pytestmark = pytest.mark.anyio

BASE, INT4 = "smollm2-135m-instruct", "smollm2-135m-instruct+int4"


README = Path(__file__).resolve().parents[2] / "README.md"
# a figure in the tour's text: 21.9%, −0.4, +7.9, 27,560, a range 20–24%
FIGURE = re.compile(r"(?<![\w.+\-−])([−+]?\d+(?:,\d{3})*(?:\.\d+)?)(?:–(\d+(?:\.\d+)?))?(%?)"
                    r"(?![\w–])")
NUMBER = re.compile(r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?")


def tour_steps() -> dict[str, str]:
    """The README tour's intro and numbered steps ("intro", "1", "2", "3"), each on one
    line, code spans (keys, config and model ids) left out."""
    text = README.read_text(encoding="utf-8").split("## A five-minute tour", 1)[1]
    text = text.split("\n", 1)[1].split("The same answer from the shell", 1)[0]
    parts = re.split(r"\n(\d)\. ", text)
    steps = {"intro": parts[0], **dict(zip(parts[1::2], parts[2::2]))}
    return {k: " ".join(re.sub(r"`[^`]*`", "", v).split()) for k, v in steps.items()}


def tour_figures(step: str) -> list[tuple[str, str | None, bool]]:
    """(figure, range end or None, percent) for every figure a step quotes."""
    return [(a.replace("−", "-"), b or None, pct == "%") for a, b, pct in FIGURE.findall(step)]


def on_screen(figure: str, percent: bool, shown: str) -> bool:
    """A figure as the tour quotes it is a number on the screen: the same digits (an
    unsigned figure matches a signed one), or, a whole percentage, a shown percentage that
    rounds to it (the tour's 100% is Pairs' 100.0)."""
    numbers = NUMBER.findall(shown)
    if figure[0] in "+-":
        return figure in numbers
    if percent and "." not in figure:
        return any(round(float(n.replace(",", ""))) == int(figure) for n in numbers)
    return figure in [n.lstrip("+") for n in numbers]


def check_tour_figures(screens: dict[str, list[str]], scoring: dict[str, list[float]]) -> None:
    """Every figure of the tour's steps is on a screen of its step: a range over the
    models (20–24%) is the rounded least and greatest of one scoring's per-model means as
    the model drill-downs show them."""
    steps = tour_steps()
    figures = {k: tour_figures(v) for k, v in steps.items()}
    assert sum(len(f) for k, f in figures.items() if k != "intro") >= 20, figures
    for k in ("1", "2", "3", "4"):
        shown = "\n".join(screens[k])
        for figure, end, percent in figures[k]:
            if end is not None:
                ranges = {name: (round(min(v)), round(max(v))) for name, v in scoring.items()}
                assert (int(figure), int(float(end))) in ranges.values(), (
                    f"tour step {k}: {figure}–{end}% is no scoring's range of per-model means "
                    f"on screen: {ranges}")
            else:
                assert on_screen(figure, percent, shown), (
                    f"tour step {k} quotes {figure}{'%' if percent else ''}, not on its "
                    f"screens:\n{shown}")
    # the intro's grid: all 265 items under all 26 configs, 27,560 cells
    header = re.search(r"(\d+) models × (\d+) items × (\d+) configs", screens["1"][0])
    models, items, configs = map(int, header.groups())
    intro = [f for f, _, _ in figures["intro"]]
    assert str(items) in intro and str(configs) in intro
    assert f"{models * items * configs:,}" in intro


async def until(app, pilot, shown, what: str, timeout: float = 30.0) -> None:
    """Wait until shown() holds (what a fixed pause used to wait for), then one more pause."""
    await wait_while(app, pilot, lambda: not shown(), timeout, what)
    await pilot.pause()


async def settle(app, pilot) -> None:
    await pilot.pause(0.2)
    await wait_ready(app, pilot, timeout=120)


@pytest.mark.starts_first
async def test_the_readme_tour_at_80x24(shipped_store):
    app = FragilityApp(str(shipped_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot, timeout=120)
        # "press 1, pick starter-real and press Enter"
        await open_pane(app, pilot, "1")
        grids = app.pane("grids").main_table()
        grids.focus()
        await pilot.press("down")  # the list opens on the shipped synthetic grid
        assert grids.current_key() == "starter-real"
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.view.grid == "starter-real"
        assert "grid: starter-real  4 models × 265 items × 48 configs" in screen_text(app)
        screens: dict[str, list[str]] = {"1": [], "2": [], "3": [], "4": []}  # each step's

        # 1. Bands: four overlapping bands, generated answers near chance, likelihood above it,
        # no item right under all 26 configs; Enter lists a model's 26 per-config accuracies
        await open_pane(app, pilot, "2")
        shown = screen_text(app)
        screens["1"].append(shown)
        for glyph in ("● reference", "◆ mean", "├─┤ min…max", "▓ robust accuracy"):
            assert glyph in shown
        cube = app.view.cube
        by_scoring = {}
        for k, c in enumerate(cube.configs):
            by_scoring.setdefault(cube.axes(c)["scoring"], []).append(k)
        generated, cloze = by_scoring["generate"], by_scoring["likelihood"]
        # the paper's 24 and 2, each with o0.letter's / cloze_qa's two BOS flips; 18 .lik
        assert (len(generated), len(cloze), len(by_scoring["letter_lik"])) == (26, 4, 18)
        for m, model in enumerate(cube.models):
            assert 0.20 <= cube.bits[m][:, generated].mean() <= 0.245, model  # 20–24%
            assert 0.355 <= cube.bits[m][:, cloze].mean(axis=0).max() <= 0.485, model
            assert not cube.bits[m].all(axis=1).any(), model  # robust accuracy 0
        assert all(b.band.robust_correct == 0 for b in app.view.report.bands)
        chart = shown[shown.index("● reference"):]
        assert "▓" not in chart.split("\n", 1)[1]  # no robust bar drawn for any model
        bars = [line for line in chart.splitlines()[1:] if "├" in line and "┤" in line]
        assert len(bars) == 4  # one band per model, drawn side by side: they overlap
        spans = [(line.index("├"), line.index("┤")) for line in bars]
        assert max(lo for lo, _ in spans) < min(hi for _, hi in spans)
        from fragility_tui.tui.screens.drilldowns import ModelScreen
        from fragility_tui.tui.widgets import ReportTable

        # Enter on each model: its 26 configs under its mean per scoring (the tour's
        # "20–24% averaged over the 24 generation configs")
        scoring: dict[str, list[float]] = {}
        for row in range(len(cube.models)):
            table = app.pane("bands").main_table()
            table.focus()
            table.move_cursor(row=row)
            await pilot.press("enter")
            await until(app, pilot, lambda: isinstance(app.screen, ModelScreen) and max(
                t.row_count for t in app.screen.query(ReportTable)) >= len(cube.configs)
                and "mean %:" in screen_text(app), "the model drill-down")
            assert max(t.row_count for t in app.screen.query(ReportTable)) >= len(cube.configs)
            shown = screen_text(app)
            screens["1"].append(shown)
            lines = shown.splitlines()
            at = next((k for k, s in enumerate(lines) if s.strip().startswith("mean %:")), None)
            assert at is not None, f"no mean per scoring on the model drill-down:\n{shown}"
            # at 80 columns the line wraps once: its continuation is the next screen line
            line = " ".join([lines[at].strip()] + [s.strip() for s in lines[at + 1:at + 2]
                                                   if "config" in s])
            for name, mean in re.findall(r"([a-z][a-z ]*?) (\d+\.\d) \(\d+ configs?\)",
                                         line.split(":", 1)[1].replace("·", "\n")):
                scoring.setdefault(name.strip(), []).append(float(mean))
            m = cube.models.index(app.screen.model)
            lik = by_scoring["letter_lik"]
            assert f"generated {100 * cube.bits[m][:, generated].mean():.1f} (26 configs)" in line
            assert f" likelihood {100 * cube.bits[m][:, cloze].mean():.1f} (4 configs)" in line
            assert f"letter likelihood {100 * cube.bits[m][:, lik].mean():.1f} (18 configs)" in line
            await pilot.press("escape")
            await pilot.pause()
        assert {len(v) for v in scoring.values()} == {4} and len(scoring) == 3, scoring

        # 2. Compare: base vs int4 at o0.letter: 21.5% vs 21.9%, Δ̂ −0.4, CI −6.0 to +4.9;
        # harness-sensitive (and underpowered) because cloze_qa says otherwise
        pane = await open_pane(app, pilot, "8")
        pane.query_one("#compare-a", Select).value = BASE
        pane.query_one("#compare-b", Select).value = INT4
        await settle(app, pilot)
        shown = screen_text(app)
        screens["2"].append(shown)
        assert f"A {BASE}  vs  B {INT4}" in shown
        assert "observed  harness-sensitive  Δ̂ -0.4 pts, 95% CI [-6.0, +4.9] at o0.letter" in shown
        assert "harness-sensitive, underpowered" in shown and "under cloze_qa" in shown
        assert "balanced  " in shown  # the label under the other target too (SPEC v3 may differ)
        assert "exact McNemar p =" in shown and "s/item" in shown  # robust-set test, cost
        benchmarks = pane.query_one(ReportTable)
        assert benchmarks.row_count == 4  # per-benchmark gaps, below: scroll the pane to them
        pane.scroll_end(animate=False)
        await pilot.pause(0.2)
        shown = screen_text(app)
        for name in sorted(set(cube.benchmarks.tolist())):  # starter_academic, ...
            assert re.search(rf"│ {name}\s", shown), (name, shown)
        pane.scroll_home(animate=False)
        ref = cube.configs.index("o0.letter")
        m_base, m_int4 = cube.models.index(BASE), cube.models.index(INT4)
        assert round(100 * cube.bits[m_base, :, ref].mean(), 1) == 21.5
        assert round(100 * cube.bits[m_int4, :, ref].mean(), 1) == 21.9
        # the cloze_qa finding, in the app (issue 24 item 9): the selection's reference
        await pilot.press("s")
        await pilot.pause()
        app.screen.query_one("#sel-reference", Select).value = "cloze_qa"
        await pilot.press("a")
        await settle(app, pilot)
        await open_pane(app, pilot, "8")
        await settle(app, pilot)
        shown = screen_text(app)
        screens["2"].append(shown)
        assert "reference cloze_qa" in shown
        assert re.search(r"observed  \S+\s+Δ̂ \+7\.9 pts, 95% CI \[\+[0-9.]+, \+[0-9.]+\] at "
                         r"cloze_qa", shown), shown  # 43.4 − 35.5; the interval excludes 0
        await open_pane(app, pilot, "2")
        shown = screen_text(app)
        screens["2"].append(shown)
        assert re.search(rf"│ {re.escape(BASE)}\s+43\.4 ", shown), shown
        assert re.search(rf"│ {re.escape(INT4)}\s+35\.5 ", shown), shown
        q = cube.configs.index("cloze_qa")
        a_bits, b_bits = cube.bits[m_base, :, q], cube.bits[m_int4, :, q]
        assert (int((a_bits & ~b_bits).sum()), int((b_bits & ~a_bits).sum())) == (33, 12)
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("r", "a")  # back to o0.letter for the rest of the tour
        await settle(app, pilot)
        assert app.view.cube.reference == "o0.letter"

        # 3. Pairs: every gap fragile (100%); Enter on a pair shows the items behind it
        await open_pane(app, pilot, "3")
        screens["3"].append(screen_text(app))
        assert "fragile share mean 100.0 %" in screen_text(app)
        app.pane("pairs").main_table().focus()
        from fragility_tui.tui.screens.drilldowns import PairScreen

        await pilot.press("enter")
        await until(app, pilot, lambda: isinstance(app.screen, PairScreen)
                    and "fragile split" in screen_text(app), "the pair drill-down")

        assert isinstance(app.screen, PairScreen)
        shown = screen_text(app)
        assert "stable: A only" in shown and "fragile split" in shown
        await pilot.press("escape")
        await pilot.pause()

        # Items: flips:INT4 lists the items whose answer moves with the harness; Enter on
        # one shows the matrix and, for a cell, the exact prompt the model saw
        await open_pane(app, pilot, "4")
        await pilot.press("slash")
        await pilot.pause()
        app.main_screen.query_one("#filter").value = f"flips:{INT4}"
        await pilot.press("enter")
        items = app.pane("items").main_table()
        await until(app, pilot, lambda: 0 < items.row_count < 265, "the filtered items")
        assert 0 < items.row_count < 265
        assert f"{items.row_count} of 265" in screen_text(app).replace(",", "")
        from fragility_tui.tui.screens.item import ItemScreen

        items.focus()
        await pilot.press("enter")
        await until(app, pilot, lambda: isinstance(app.screen, ItemScreen)
                    and app.screen.query("#bit-matrix"), "the item drill-down")
        await app.workers.wait_for_complete()  # the cells and chat templates load in a worker
        await pilot.pause()
        matrix = app.screen.query_one("#bit-matrix")
        matrix.move_cursor(row=cube.models.index(INT4), column=app.screen.column_of("o0.letter"))
        await until(app, pilot, lambda: "chat template's rendering" in str(
            app.screen.query_one("#cell-detail").render()), "the int4 cell's prompt")
        detail = str(app.screen.query_one("#cell-detail").render())
        assert "prompt as the model saw it (the chat template's rendering" in detail
        assert "<|im_start|>user\nQuestion:" in detail and "<|im_start|>assistant" in detail
        assert "permutation" in detail and "raw output" in detail and "parse:" in detail
        gemma = cube.models.index("gemma3-270m")
        matrix.move_cursor(row=gemma, column=app.screen.column_of("o0.letter"))
        await until(app, pilot, lambda: "(raw prompt" in str(
            app.screen.query_one("#cell-detail").render()), "the gemma cell's prompt")
        detail = str(app.screen.query_one("#cell-detail").render())
        assert "prompt as the model saw it (raw prompt" in detail and "Answer:" in detail
        assert "✓" in screen_text(app) and "✗" in screen_text(app)  # the models × configs matrix

        # 4. Axes: the extension configs as axes of their own (scoring holds the .lik
        # configs, bos the flips); the mean preserved fraction of each
        await open_pane(app, pilot, "5")
        shown = screen_text(app)
        screens["4"].append(shown)
        mean = app.view.report.axes.mean
        assert list(mean)[:5] == ["order", "format", "scoring", "all", "bos"], mean
        for axis in ("scoring", "bos"):
            assert re.search(rf"{axis} [^\n]* {mean[axis]:.2f}", shown), (axis, shown)

        # every figure the tour's steps quote is on the screens of its step
        check_tour_figures(screens, scoring)
