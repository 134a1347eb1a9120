"""`fragility-tui` with no subcommand: the app on a real terminal."""

from __future__ import annotations

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.hangup import end_process, guarded


def run_app(db_path: str | None = None) -> int:
    """The app paints at once and opens the store (loading the shipped grids on a first start)
    in a worker; it ends on SIGHUP, SIGTERM or a lost terminal (tui/hangup.py)."""
    app = FragilityApp(db_path, load_samples=True, guard_terminal=True)
    app.run()
    code = app.return_code or 0
    if guarded(app):  # it ran here: never wait for a worker thread still computing
        end_process(code)
    return code  # the app never mounted (a test replaced App.run): nothing to end
