"""Issue 47 item 5: names holding terminal escape sequences reach the terminal as visible
stand-ins, not as sequences the terminal obeys (`grids`, `grids delete`)."""

from __future__ import annotations

from helpers import run_cli

EVIL = "evil\x1b]0;pwned\x07\x1b[2J"


def test_grids_prints_no_escape_sequence(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("simulate", "--models", "2", "--items", "5", "--grid", EVIL, db=db, check=True)
    listed = run_cli("grids", db=db, check=True)
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "evil␛]0;pwned" in listed.stdout
    asked = run_cli("grids", "delete", EVIL, db=db)
    assert asked.returncode == 2 and "\x1b" not in asked.stderr


def test_the_run_display_shows_names_without_escape_sequences():
    import io

    from runners.run.events import Display

    stream = io.StringIO()
    Display("plain", stream).show({
        "event": "started", "run_id": "r", "grid": EVIL, "models": [EVIL], "items": 1,
        "configs": ["o0.letter"], "cells_total": 1, "cells_done": 0, "events_path": None})
    assert "\x1b" not in stream.getvalue() and "\x07" not in stream.getvalue()
    assert "evil␛]0;pwned" in stream.getvalue()
