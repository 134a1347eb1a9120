"""`fragility-tui` with no subcommand: the app on a real terminal."""

from __future__ import annotations

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.hangup import end_process


def run_app(db_path: str | None = None) -> int:
    """The app paints at once and opens the store (loading the shipped grids on a first start)
    in a worker; it ends on SIGHUP, SIGTERM or a lost terminal (tui/hangup.py)."""
    app = FragilityApp(db_path, load_samples=True, guard_terminal=True)
    app.run()
    end_process(app.return_code or 0)  # never wait for a worker thread still computing
    return 0
