"""Issue 60, the forms: the Compare form's "stop when settled" box reads ticked or not by its
glyph (Textual's draws X both ways, only shaded: alike under NO_COLOR) and names no issue
number; opened from the sequence view (`v`) it is ticked; both run forms propose a new grid
instead of the shipped real one and warn once when it is typed in; the sequential comparison
has a chunk field (a pool of 12 items was one chunk of 25: nothing narrowed); the pane clears
the previous pair's figures while a new comparison starts, with the sequence's columns, and
draws the last chunk at the plot's right edge."""

from __future__ import annotations

import re

import pytest
from textual.widgets import Checkbox, Input

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.panes.compare_form import CompareFormScreen
from fragility_tui.tui.panes.compare_sequence import SequenceReady
from fragility_tui.tui.panes.run_form import NEW_GRID, check_sequential_form
from fragility_tui.tui.sequence import SequencePlan, SequenceSettings, replay_state

from .conftest import open_pane, screen_text, terminal_bytes, wait_ready, wait_workers
from .test_compare_form import open_compare_form

pytestmark = pytest.mark.anyio


def box_line(app) -> str:
    return next(line for line in screen_text(app).splitlines() if "when settled (" in line)


async def test_the_settled_box_shows_a_tick_only_when_ticked_and_no_issue_number(
        synthetic_store, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_compare_form(app, pilot)
        assert "▐ ▌ when settled" in box_line(app)
        assert not re.search(r"issue \d+", screen_text(app))
        form.query_one("#cf-settled", Checkbox).value = True
        await pilot.pause()
        assert "▐✓▌ when settled" in box_line(app)
        assert "Stop when settled" in screen_text(app)
        assert "✓" in terminal_bytes(app)  # the glyph itself reaches the terminal


async def test_the_form_opened_from_the_sequence_view_is_ticked(synthetic_store):
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await open_pane(app, pilot, "8")
        pane.focus_main()
        await pilot.press("v")
        await wait_workers(app)
        assert pane.sequence_on
        await pilot.press("n")
        for _ in range(100):
            await pilot.pause(0.05)
            if isinstance(app.screen, CompareFormScreen):
                break
        form = app.screen
        assert form.query_one("#cf-settled", Checkbox).value
        assert not form.query_one("#cf-chunk", Input).disabled
        assert "▐✓▌ when settled" in box_line(app) and "Stop when settled" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("v")  # back to the full decision: the form opens unticked
        await wait_workers(app)
        await pilot.press("n")
        for _ in range(100):
            await pilot.pause(0.05)
            if isinstance(app.screen, CompareFormScreen):
                break
        assert not app.screen.query_one("#cf-settled", Checkbox).value
        await pilot.press("escape")
        await pilot.pause()
        # opened from the sequence view and unticked: two plain runs, and the pane leaves
        # the sequence view (a replay's "not settled (pool exhausted)" read as their result)
        await pilot.press("v")
        await wait_workers(app)
        await pilot.press("n")
        for _ in range(100):
            await pilot.pause(0.05)
            if isinstance(app.screen, CompareFormScreen):
                break
        form = app.screen
        launched = []
        app.pane("runs").launch = lambda argv, what: launched.append(argv)
        form.query_one("#cf-settled", Checkbox).value = False
        form.query_one("#cf-model-a", Input).value = "smollm2-135m-instruct"
        form.query_one("#cf-model-b", Input).value = "gemma3-270m"
        form.query_one("#cf-grid", Input).value = "fresh"
        await pilot.pause()
        form.action_start()
        await pilot.pause()
        assert len(launched) == 2 and not pane.sequence_on


async def test_both_run_forms_propose_a_new_grid_over_the_shipped_one(shipped_store,
                                                                       monkeypatch):
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "starter-real")
    app = FragilityApp(str(shipped_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot, timeout=120)
        assert app.grid_name == "starter-real"
        runs = await open_pane(app, pilot, "7")
        assert runs.query_one("#run-grid", Input).value == NEW_GRID
        launched = []
        runs.launch = lambda argv, what: launched.append(argv)
        runs.query_one("#run-model", Input).value = "smollm2-135m-instruct"
        runs.query_one("#run-grid", Input).value = "starter-real"  # typed in: warned once
        runs.action_start_run()
        await pilot.pause()
        assert launched == []
        assert "starter-real is a shipped grid" in str(runs.query_one("#run-note").render())
        runs.action_start_run()
        assert len(launched) == 1 and launched[0][launched[0].index("--grid") + 1] == \
            "starter-real"
        runs.focus_main()
        form = await open_compare_form(app, pilot)
        assert form.query_one("#cf-grid", Input).value == NEW_GRID
        form.query_one("#cf-model-a", Input).value = "smollm2-135m-instruct"
        form.query_one("#cf-model-b", Input).value = "gemma3-270m"
        form.query_one("#cf-grid", Input).value = "starter-real"
        form.action_start()
        await pilot.pause()
        assert isinstance(app.screen, CompareFormScreen)
        assert "starter-real is a shipped grid" in str(form.query_one("#cf-error").render())
        form.query_one("#cf-grid", Input).value = NEW_GRID  # a grid of one's own: no question
        form.action_start()
        await pilot.pause()
        assert not isinstance(app.screen, CompareFormScreen)


def test_the_chunk_field_reaches_compare(tmp_path):
    form = {"model_a": "smollm2-135m-instruct", "b_build": "int4", "grid": "g",
            "per_benchmark": "3", "chunk": "3"}
    plan, problems = check_sequential_form(form, tmp_path, None)
    assert problems == [] and plan.settings.chunk == 3
    argv = list(plan.argv)
    assert argv[argv.index("--chunk") + 1] == "3"
    from fragility_tui.cli import build_parser

    assert build_parser().parse_args(argv).chunk == 3
    plan, problems = check_sequential_form({**form, "chunk": ""}, tmp_path, None)
    assert "--chunk" not in plan.argv and plan.settings.chunk == 25  # the CLI's default
    for bad, said in (("0", "chunk: must be at least 1"), ("2.5", "chunk: '2.5' is not")):
        _, problems = check_sequential_form({**form, "chunk": bad}, tmp_path, None)
        assert any(p.startswith(said) for p in problems), problems


def plot_lines(app, plot) -> list[str]:
    """The plot's area on screen, its border title row left out."""
    r = plot.region
    return [line[r.x:r.right] for line in screen_text(app).splitlines()[r.y + 1:r.bottom]]


async def test_a_new_comparison_clears_the_last_pairs_figures_and_the_last_chunk_is_drawn(
        synthetic_store):
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_pane(app, pilot, "8")
        await wait_workers(app)
        await pilot.pause(0.3)
        plot = pane.query_one("#compare-plot")
        assert plot.display and any("●" in line for line in plot_lines(app, plot))
        # a stop-when-settled comparison of a new pair starts: nothing of the last pair
        plan = SequencePlan("fresh", "new-a", "new-b", ("compare",), SequenceSettings(chunk=10))
        pane.follow(plan)
        pane.want("fresh", "new-a", "new-b")
        await pilot.pause(0.3)
        assert "waiting for the first chunk's cells" in " ".join(screen_text(app).split())
        assert not any("●" in line for line in plot_lines(app, plot))
        table = pane.query_one("#compare-table")
        assert [str(c.label) for c in table.columns.values()][-1] == "reading"
        assert "sequence per chunk" in str(table.border_title)
        # the sequence of the open grid's pair: 40 items in chunks of 10, to the pool's end
        pane.wanted, pane.following = None, None
        a, b = pane._picked_pair()
        pane.sequence_on = True
        state = replay_state(app.view.cube, a, b, SequenceSettings(chunk=10, margin=0.0))
        assert [s.items for s in state.result.path][-1] == 40 == state.result.pool
        pane.post_message(SequenceReady(app.view, a, b, state))
        await pilot.pause(0.5)
        drawn = sum(line.count("●") for line in plot_lines(app, plot))
        assert drawn == len([s for s in state.result.path if s.delta is not None]), \
            "\n".join(plot_lines(app, plot))
        assert any("┊" in line for line in plot_lines(app, plot))  # the stop, at the end
