"""Issue 60: a pane's keys work whatever widget inside it has focus, or the footer does not
offer them. Before, the Compare model pickers kept focus after a pick and dropped `s` (and a
pane's digit) while the footer still offered "s Selection" (tour step 2).

For every pane and every focusable widget in it: each printable key bound there (the pane's,
the app's, the widget's own) either reaches its action when pressed, or is left out of the
bindings the footer shows. The actions are recorded, not run."""

from __future__ import annotations

import pytest
from textual.keys import key_to_character
from textual.widgets import Footer, Input
from textual.widgets._footer import FooterKey

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.panes import PANES
from fragility_tui.tui.screens import SelectionScreen

from .conftest import open_pane, wait_ready, walk_checks

pytestmark = pytest.mark.anyio


def printable(key: str) -> bool:
    character = key_to_character(key)
    return key != "space" and character is not None and character.isprintable()


def footer_keys(app) -> set[str]:
    """The keys the footer shows (Textual's Footer reads the same active bindings)."""
    return {key for key, active in app.screen.active_bindings.items()
            if active.binding.show and active.enabled}


async def test_one_app_walks_every_pane_s_keys_then_the_run_form_s(synthetic_store):
    """Both checks at 120×40 on one app (issue 60: each started its own); the first leaves
    no widget focused and its recorder removed."""
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        await walk_checks(
            app, pilot, check_every_offered_key_works_from_every_widget_of_every_pane,
            check_the_run_form_keeps_its_letters_and_the_footer_does_not_offer_them)


def footer_widgets(app) -> list[FooterKey]:
    return list(app.screen.query_one(Footer).query(FooterKey))


def check_the_footer_follows_the_focus(app, before: tuple[tuple, list]) -> tuple[tuple, list]:
    """The footer's keys are the screen's shown bindings; where those are the same as at
    the focus just before, the same key widgets (the footer is rebuilt only when its keys
    change: a rebuild was ~15% of the app's CPU while moving between panes)."""
    shown = tuple((key, active.binding.action, active.binding.description, active.enabled)
                  for key, active in app.screen.active_bindings.items() if active.binding.show)
    first_per_action = {}  # the footer shows an action once, by its first key
    for key, action, _, enabled in shown:
        first_per_action.setdefault(action, (key, enabled))
    widgets = footer_widgets(app)
    on_footer = {w.action: (w.key, not w.disabled) for w in widgets
                 if not w.has_class("-command-palette")}  # shown apart, at the right
    assert on_footer == first_per_action
    if shown == before[0]:
        assert widgets == before[1] and all(a is b for a, b in zip(widgets, before[1]))
    return shown, widgets


async def check_every_offered_key_works_from_every_widget_of_every_pane(app, pilot):
    fired: list[str] = []
    footer = ((), [])
    kept = 0

    async def record(action, default_namespace=None, namespaces=None) -> bool:
        fired.append(action if isinstance(action, str) else str(action))
        return True

    checked = 0
    for k, pane_class in enumerate(PANES):
        await open_pane(app, pilot, str(k + 1))
        pane = app.pane(pane_class.pane_id)
        widgets = [w for w in pane.query("*") if w.focusable and w.visible
                   and w.region.area and not isinstance(w, Input)]
        assert widgets, pane_class.pane_id
        footer = ((), [])  # opening a pane moves the focus through other widgets
        for widget in widgets:
            widget.focus()
            await pilot.pause()
            assert app.focused is widget
            shown_before = footer[0]
            footer = check_the_footer_follows_the_focus(app, footer)
            kept += footer[0] == shown_before
            offered = {key: active.binding.action
                       for key, active in app.screen.active_bindings.items()
                       if active.enabled and printable(key)}
            app.run_action = record
            try:
                for key, action in offered.items():
                    fired.clear()
                    # press returns once the key is handled (the binding's action is
                    # awaited in the key's handling) and the screen is idle
                    await pilot.press(key)
                    assert fired and fired[0] == action, (
                        f"{pane_class.pane_id}: {key!r} ({action}) offered with "
                        f"{type(widget).__name__}#{widget.id} focused, but it did nothing")
                    checked += 1
            finally:
                del app.run_action
        app.screen.set_focus(None)  # the run form keeps digits: leave it before the next
    assert checked > 100
    assert kept >= 3  # focus moves that kept the footer's keys (4 on 2026-12-06)


async def check_the_run_form_keeps_its_letters_and_the_footer_does_not_offer_them(app, pilot):
    """On the run form's Start button, letters stay dropped (issue 24: `u` and `k` once
    changed runs from there), so the footer shows none of them."""
    pane = await open_pane(app, pilot, "7")
    pane.main_table().focus()
    await pilot.pause()
    assert {"k", "u", "n", "s"} <= footer_keys(app)
    pane.query_one("#run-start").focus()
    await pilot.pause()
    assert not {key for key in footer_keys(app) if printable(key)}
    assert app.query_one(Footer)


async def test_tour_step_2_s_opens_the_selection_after_picking_a_and_b(synthetic_store):
    """Pick A and B with the keyboard, then `s`: the selection form opens; a digit switches
    pane; Esc still leaves the pickers for the table."""
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        pane = await open_pane(app, pilot, "8")
        picker = pane.query_one("#compare-a")
        picker.focus()
        await pilot.press("enter", "down", "enter")  # open, next model, pick
        await pilot.pause()
        assert app.focused is picker
        assert "s" in footer_keys(app)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, SelectionScreen)
        await pilot.press("escape")
        await pilot.pause()
        picker.focus()
        await pilot.press("2")
        await pilot.pause(0.3)
        assert app.query_one("#panes").current == "bands"
        await open_pane(app, pilot, "8")
        picker.focus()
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is pane.main_table()
