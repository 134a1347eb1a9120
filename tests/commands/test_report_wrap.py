"""`report` wraps its prose to the terminal (100 columns when piped) instead of cutting it
mid-sentence (issue 43 item 2; issue 44 saw `fragile s…d 100.0%` at any width). Piped, its
tables keep one line per row, uncut, however wide (issue 60: a script reads them)."""

from __future__ import annotations

import re

from fragility_tui.analysis.report import report_of
from fragility_tui.analysis.report_text import Section, render_sections, render_text
from fragility_tui.grid.simulate import simulate
from helpers import run_cli


def test_every_note_is_whole_and_every_line_fits():
    typed = report_of(simulate(12, 120, 3).cube, discrimination="irt", n_boot=50, k=20,
                      n_random=20)
    irt = typed.to_json()["discrimination"]["irt"]
    for width in (80, 100, 200):
        text = render_text(typed, width)
        if width >= 100:  # narrower, the widest tables stop shortening names before they fit
            assert max(len(line) for line in text.splitlines()) <= width
        flat = re.sub(r"\s+", " ", text)
        for note in (irt["warning"], irt["slope_se_warning"], irt["two_way_ci"]):
            assert note in flat, (width, note)


def test_prose_wraps_to_the_width_and_keeps_every_word():
    note = "the stable items lean against the gap " * 8
    text = render_sections([Section("T", notes=[note])], 80)
    lines = text.splitlines()[2:]
    assert all(len(line) <= 80 for line in lines) and "…" not in text
    assert " ".join(" ".join(lines).split()) == " ".join(note.split())


def test_a_piped_report_wraps_to_a_hundred_columns(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("simulate", "--models", "4", "--items", "80", "--seed", "1", "--grid", "w",
            db=db, check=True)
    proc = run_cli("report", "--grid", "w", "--boot", "50", "--random-draws", "20", db=db,
                   env={"COLUMNS": "200"}, check=True)
    lines = proc.stdout.splitlines()
    table_lines = {line for line in lines if "  " in line.rstrip()}  # columns: two spaces
    prose = [line for line in lines if line not in table_lines]
    assert max(map(len, prose)) <= 100  # piped: prose wraps to 100, whatever COLUMNS says
    assert max(map(len, lines)) > 100 and "…" not in proc.stdout  # the tables: uncut
    flat = " ".join(proc.stdout.split())
    for prose in ("more flags: the blocking flags after the label; family CI: the "
                  "simultaneous 95% interval over all adjacent pairs of that target",
                  "support: the exact test of A+ against B+ (manufactured: p >= 0.05; "
                  "reversed: the stable items order the pair against its gap)"):
        assert prose in flat  # whole: names may be shortened in tables, prose never
