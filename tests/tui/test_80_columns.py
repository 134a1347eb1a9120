"""Issue 60, at 80×24 on the shipped real grid: what a pane is about comes first and fits.
Pairs showed its decisions as `unde` / `harn`, Items hid fragility off-screen (its hint
suggests frag>0.5), Bands stopped at `spr` (and at 100 columns showed robust as `0.`), a
pane's intro could lose its last line; under NO_COLOR the ✗ of the ✓/✗ matrices was grey 237
on grey 235."""

from __future__ import annotations

import re

import pytest
from rich.segment import Segment

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.panes import PANE_NAMES, pane_class

from .conftest import (assert_footer_whole, open_pane, screen_lines, screen_text,
                       shown_footer_keys, wait_ready)

pytestmark = pytest.mark.anyio


def table_lines(app) -> list[str]:
    """The rows of the shown pane's table as on screen (inside its border; a line holding
    only the horizontal scrollbar left out)."""
    lines = screen_lines(app)
    top = next(k for k, line in enumerate(lines) if line.startswith("╭"))
    end = next(k for k, line in enumerate(lines) if k > top and line.startswith("╰"))
    return [line[1:-1] for line in lines[top + 1:end] if re.search(r"\w", line)]


def cells_of(app, glyph: str) -> list[Segment]:
    """The matrix cells on screen holding `glyph` (segments of marks only, not a legend)."""
    update = app.screen._compositor.render_full_update()
    return [seg for line in update.strips for strip in line for seg in strip
            if glyph in seg.text and set(seg.text) <= set("✓✗· ")]


def luminance(color) -> float:
    r, g, b = color.get_truecolor()
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def assert_legible(app, glyph: str) -> None:
    segments = cells_of(app, glyph)
    assert segments, glyph
    for seg in segments:
        style = seg.style
        assert style.color is not None and style.bgcolor is not None
        assert abs(luminance(style.color) - luminance(style.bgcolor)) > 0.3, (glyph, style,
                                                                               seg.text)


async def test_every_pane_leads_with_its_figures_at_80_columns(shipped_store, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = FragilityApp(str(shipped_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot, timeout=120)
        await open_pane(app, pilot, "1")
        grids = app.pane("grids").main_table()
        grids.focus()
        await pilot.press("down", "enter")
        await pilot.pause(0.2)
        await wait_ready(app, pilot, timeout=120)
        assert app.view.grid == "starter-real"
        report = app.view.report

        # every pane's intro whole (the Axes intro lost its last line)
        for key, (pane_id, _, _) in enumerate(PANE_NAMES, start=1):
            if pane_id in ("compare", "runs", "grids"):
                continue  # the tour's engineer's panes; Grids and Runs need no view
            await open_pane(app, pilot, str(key))
            shown = " ".join(screen_text(app).split())
            assert " ".join(pane_class(pane_id).help.split()) in shown, pane_id

        # Pairs: verdict and both decisions whole, beside the pair they belong to
        await open_pane(app, pilot, "3")
        rows = table_lines(app)[1:]
        assert len(rows) == len(report.pairs)
        labels = {(d.a, d.b, d.target): d.label for d in report.decisions
                  if d.config == report.grid.reference}
        for pair, line in zip(report.pairs, rows):
            words = line.split()
            assert pair.verdict.split()[0] in words
            for target in ("observed", "balanced"):
                assert labels[(pair.a, pair.b, target)] in words, (target, line)
        assert "harness-sensitive" in " ".join(rows)  # the longest label, whole

        # Items: fragility in view, right after the item
        await open_pane(app, pilot, "4")
        head, first = table_lines(app)[:2]
        assert head.split()[:2] == ["item", "fragility"]
        assert re.search(r"\b[01]\.\d{3}\b", first)

        # Bands: the band's figures whole, robust included, at 80 and at 100 columns; the
        # footer's keys whole at each width, more of them at 100 (kept, not rebuilt, on resize)
        await open_pane(app, pilot, "2")
        footer_keys = []
        for width in (80, 100):
            await pilot.resize_terminal(width, 24)
            await pilot.pause(0.2)
            assert_footer_whole(app)
            footer_keys.append(shown_footer_keys(app))
            head, *body = table_lines(app)
            for column in ("ref %", "mean %", "min %", "max %", "spread", "robust %"):
                assert column in head, (width, column)
            for band, line in zip(report.bands, body):
                assert line.split()[:7] == [band.band.model] + [
                    f"{100 * x:.1f}" for x in (band.band.reference, band.band.mean,
                                               band.band.min, band.band.max,
                                               band.band.spread, band.band.robust_accuracy)]
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.2)
        assert_footer_whole(app)
        assert shown_footer_keys(app) == footer_keys[0] < footer_keys[1]

        # NO_COLOR: the ✗ of the model's config matrix and of the item's matrix stays legible
        from fragility_tui.tui.screens import ItemScreen, ModelScreen

        app.pane("bands").main_table().focus()
        await pilot.press("enter")
        await pilot.pause(0.5)
        assert isinstance(app.screen, ModelScreen)
        assert_legible(app, "✗")
        app.screen.query_one("#model-items").focus()
        await pilot.press("enter")
        for _ in range(200):
            await pilot.pause(0.05)
            if isinstance(app.screen, ItemScreen) and app.screen.cells:
                break
        assert isinstance(app.screen, ItemScreen)
        await pilot.pause(0.2)
        assert_legible(app, "✗")
        assert_legible(app, "✓")
