"""`fragility-tui` with no subcommand: the app on a real terminal."""

from __future__ import annotations

import gc

from textual import on

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.hangup import end_process, guarded
from fragility_tui.tui.messages import ViewReady


class TerminalApp(FragilityApp):
    """The app as `fragility-tui` runs it: cli.main pauses Python's collector while Textual
    and the app load and paint (nothing they make is garbage worth the pause)."""

    def on_ready(self) -> None:
        """After the first frame: collect what the start made, freeze the rest (long-lived)
        out of later collections, and turn the collector back on. Not in FragilityApp: a
        frozen object is never collected, and a test process makes hundreds of apps."""
        gc.collect()
        gc.freeze()
        gc.enable()

    @on(ViewReady)
    def _settle_heap(self, message: ViewReady) -> None:
        """A grid's view holds a few hundred thousand objects: the collector would scan
        them all again in each full collection, one of which then lands inside a pane
        switch (~70 ms on 12 x 3,679). Once per computed view, while the user reads its
        status line: collect (what the last view left among the frozen objects too) and
        freeze what is left."""
        if not message.view.partial:
            gc.unfreeze()
            gc.collect()
            gc.freeze()


def run_app(db_path: str | None = None) -> int:
    """The app paints at once and opens the store (loading the shipped grids on a first start)
    in a worker; it ends on SIGHUP, SIGTERM or a lost terminal (tui/hangup.py)."""
    app = TerminalApp(db_path, load_samples=True, guard_terminal=True)
    try:
        app.run()
    finally:
        gc.enable()  # on_ready did, unless the app never painted
    code = app.return_code or 0
    if guarded(app):  # it ran here: never wait for a worker thread still computing
        end_process(code)
    return code  # the app never mounted (a test replaced App.run): nothing to end
