"""A reload the live watcher scheduled, or a status line, must not reach an app that is
closing: quitting while a run writes into the open grid left a debounce timer whose reload
found no screen (IndexError from `main_screen` during shutdown, seen in CI)."""

from __future__ import annotations

from types import SimpleNamespace

from fragility_tui.tui.live import LiveGrid


def fake_app(screens: list) -> SimpleNamespace:
    app = SimpleNamespace(screen_stack=screens, computing=False, reloads=0)
    app.reload_grid = lambda: setattr(app, "reloads", app.reloads + 1)
    return app


def test_a_scheduled_reload_after_the_screens_are_gone_does_nothing():
    app = fake_app([])
    watcher = LiveGrid(app)
    watcher._reload_later()  # what the debounce timer calls
    assert app.reloads == 0 and watcher.pending is None


def test_a_scheduled_reload_while_the_app_runs_reloads():
    app = fake_app([object()])
    LiveGrid(app)._reload_later()
    assert app.reloads == 1


def test_a_status_line_that_arrives_after_the_screens_are_gone_is_dropped():
    """The same race through the status line: a worker's progress (`_progress`) or a
    recompute can reach `set_status` after the screens are gone."""
    from fragility_tui.tui.app import FragilityApp

    app = FragilityApp()
    assert not app.screen_stack
    app.set_status("computing … under the selection")  # IndexError before the guard
