"""Issue 24 (2), (4): keys pressed in a form stay in it, Esc leaves it from any field, `k`
and `u` ask before they change a run, and the run form never proposes a synthetic grid."""

from __future__ import annotations

from functools import partial

import pytest
from textual.widgets import Input

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.confirm import ConfirmScreen

from .conftest import open_pane, wait_ready, walk_checks

pytestmark = pytest.mark.anyio


def add_run(store, status: str) -> str:
    return store.create_run({"grid": "synthetic-small", "model": "m", "status": status,
                             "cells_done": 3, "cells_total": 10,
                             "spec": {"models": ["m"], "items": ["x.jsonl"], "grid": "g"}})


async def open_runs(app, pilot):
    pane = await open_pane(app, pilot, "7")
    for _ in range(40):  # the pane reads the run rows once a second
        await pilot.pause(0.1)
        if pane.runs or not app.gateway.runs():
            break
    launched = []
    pane.launch = lambda argv, what: launched.append(argv)  # record, start nothing
    return pane, launched


async def test_one_app_walks_the_compare_pickers_and_the_run_form(synthetic_store):
    """The checks of this file on a store without runs, on one app (issue 60: each started
    its own). In this order because each leaves the app as the next expects: the run form's
    grid is read before a check fills it; letters typed into a field keep it focused (a pane
    digit would be text there), so that check ends."""
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        await walk_checks(app, pilot, check_escape_leaves_the_compare_pickers,
                          check_a_blank_compare_choice_clears_the_previous_result,
                          check_the_run_form_does_not_propose_a_synthetic_grid,
                          check_escape_leaves_the_run_form_from_any_field,
                          check_letters_typed_in_a_field_are_text)


async def check_escape_leaves_the_compare_pickers(app, pilot):
    """(Their letters and digits work as anywhere in the pane since issue 60:
    test_keys_where_focused.py.)"""
    pane = await open_pane(app, pilot, "8")
    pane.query_one("#compare-a").focus()
    await pilot.pause()
    await pilot.press("escape")
    await pilot.pause()
    assert app.focused is pane.main_table()


async def check_a_blank_compare_choice_clears_the_previous_result(app, pilot):
    """Issue 24 (14): the old result stayed on screen under a blank "model A"."""
    from textual.widgets import Select

    pane = await open_pane(app, pilot, "8")
    for _ in range(200):
        await pilot.pause(0.05)
        if "vs  B" in str(pane.query_one("#compare-result").render()):
            break
    assert pane.main_table().row_count > 0
    pane.query_one("#compare-a", Select).clear()
    await pilot.pause()
    assert "pick two different models" in str(pane.query_one("#compare-result").render())
    assert pane.main_table().row_count == 0


async def check_the_run_form_does_not_propose_a_synthetic_grid(app, pilot):
    pane, launched = await open_runs(app, pilot)
    assert app.view.synthetic
    assert pane.query_one("#run-grid", Input).value == "my-grid"  # a new grid
    pane.query_one("#run-model", Input).value = "smollm2-135m-instruct"
    pane.query_one("#run-grid", Input).value = "synthetic-small"
    pane.action_start_run()
    await pilot.pause()
    assert launched == []
    assert "SYNTHETIC" in str(pane.query_one("#run-note").render())


async def check_escape_leaves_the_run_form_from_any_field(app, pilot):
    pane, _ = await open_runs(app, pilot)
    for field in ("#run-model", "#run-sample", "#run-quantize", "#run-start"):
        pane.query_one(field).focus()
        await pilot.pause()
        assert app.focused is pane.query_one(field)
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is pane.main_table(), field


async def check_letters_typed_in_a_field_are_text(app, pilot):
    pane, launched = await open_runs(app, pilot)
    box = pane.query_one("#run-configs", Input)
    box.focus()
    await pilot.press("u", "k", "7")
    assert box.value == "uk7" and launched == []


async def test_app_letters_do_not_fire_while_the_form_has_focus(synthetic_store):
    """On the Start button or the quantise menu, `u`, `k`, `n`, `s`, `q` and a pane digit
    do nothing (before: `u` resumed and `k` cancelled the selected run, `q` quit)."""
    add_run(synthetic_store, "cancelled")
    app = FragilityApp(str(synthetic_store.path))  # one app: a field, then the other
    async with app.run_test(size=(120, 40)) as pilot:
        pane, launched = await open_runs(app, pilot)
        assert pane.runs, "the run row is listed"
        for field in ("#run-start", "#run-quantize"):
            pane.query_one(field).focus()
            await pilot.pause()
            for key in ("u", "k", "n", "s", "x", "2", "q"):
                await pilot.press(key)
                await pilot.pause()
            assert launched == [] and len(app.screen_stack) == 1, field
            assert app.query_one("#panes").current == "runs" and app.is_running, field
            assert app.focused is pane.query_one(field)


@pytest.mark.parametrize("key,status,argv0", [("u", "cancelled", "run"),
                                              ("k", "running", "runs")])
async def test_cancel_and_resume_ask_first(synthetic_store, key, status, argv0):
    add_run(synthetic_store, status)
    if status == "running":  # a live process: this test's own
        import os

        from fragility_tui.processes import process_start

        run_id = synthetic_store.runs()[0].run_id
        synthetic_store.update_run(run_id, pid=os.getpid(),
                                   pid_started=process_start(os.getpid()))
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        pane, launched = await open_runs(app, pilot)
        pane.main_table().focus()
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")  # the focused button is No: Enter alone never confirms
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen) and launched == []
        await pilot.press(key)
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert launched == []
        await pilot.press(key)
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert len(launched) == 1 and launched[0][0] == argv0


async def test_one_app_walks_the_checks_on_a_finished_run(synthetic_store):
    """Two checks on one finished run, on one app (issue 60: each started its own): `u`
    does not offer it for resume, Enter shows its card."""
    run_id = add_run(synthetic_store, "finished")
    synthetic_store.update_run(run_id, seconds=2238.3082875929995)
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await walk_checks(app, pilot, check_a_finished_run_is_not_offered_for_resume,
                          partial(check_enter_on_a_run_shows_the_card_runs_show_prints,
                                  run_id=run_id))


async def check_a_finished_run_is_not_offered_for_resume(app, pilot):
    pane, launched = await open_runs(app, pilot)
    pane.main_table().focus()
    await pilot.press("u")
    await pilot.pause()
    assert not isinstance(app.screen, ConfirmScreen) and launched == []
    assert "nothing to resume" in str(pane.query_one("#run-note").render())


async def check_enter_on_a_run_shows_the_card_runs_show_prints(app, pilot, run_id):
    """Issue 24 (15): Enter showed raw JSON (`seconds 2238.3082875929995`) first."""
    pane, _ = await open_runs(app, pilot)
    pane.main_table().focus()
    await pilot.press("enter")
    await pilot.pause()
    card = str(app.screen.query_one("#provenance").render())
    assert card.startswith(f"Run {run_id}  status finished") and "seconds 2238.3\n" in card
