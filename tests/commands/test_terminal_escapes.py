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


def test_markdown_exports_carry_no_escape_sequence_and_csv_keeps_data(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("simulate", "--models", "2", "--items", "5", "--grid", EVIL, db=db, check=True)
    for what in ("cells", "report", "provenance"):
        out = tmp_path / f"{what}.md"
        done = run_cli("export", "--grid", EVIL, "--what", what, "--format", "markdown",
                       "--out", str(out), db=db, check=True)
        text = out.read_text()
        assert "\x1b" not in text and "\x07" not in text and "\x1b" not in done.stderr, what
    run_cli("export", "--grid", EVIL, "--what", "cells", "--format", "csv", "--out",
            str(tmp_path / "cells.csv"), db=db, check=True)
