"""Issue 44: intervals read `[−0.29, −0.11]` (brackets, a comma), not `-0.29–-0.11`:
report's decisions and discrimination, calibrate's rates and the panes' calibration line
share analysis/intervals.py. The panes write a true minus sign; text output the ASCII one
like its other numbers (issue 60: one sign in a row, and grep finds it)."""

from __future__ import annotations

import re

from helpers import run_cli

from fragility_tui.analysis.calibration_result import Rate
from fragility_tui.analysis.intervals import ASCII_MINUS, MINUS, interval, signed


def test_interval_uses_brackets_a_comma_and_a_true_minus():
    assert interval(-0.29, -0.11, 2) == f"[{MINUS}0.29, {MINUS}0.11]"
    assert interval(-6.04, 4.9) == f"[{MINUS}6.0, 4.9]"
    assert interval(-6.04, 4.9, 1, ASCII_MINUS) == "[-6.0, 4.9]"
    assert signed(-0.04, 1) == "0.0"  # no negative zero
    assert Rate(1, 4, 0.25, 0.046, 0.699).with_interval() == "25% [5, 70]"


def test_report_and_calibrate_text_write_intervals_so(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("simulate", "--models", "4", "--items", "40", "--seed", "3", "--grid", "syn",
            db=db, check=True)
    text = run_cli("report", "--grid", "syn", "--boot", "50", "--random-draws", "5", db=db,
                   check=True).stdout
    bracketed = re.findall(r"\[[^\]]*\d[^\]]*\]", text)
    assert bracketed and any("-" in b for b in bracketed)  # this grid has negative bounds
    assert MINUS not in text
    for b in bracketed:
        assert re.fullmatch(r"\[-?\d+\.\d+, -?\d+\.\d+\]", b), b
    cal = run_cli("calibrate", "--grid", "syn", "--replicates", "6", "--boot", "20", db=db,
                  check=True).stdout
    rates = re.findall(r"\d+(?:\.\d)?% (\[[^\]]*\])", cal)
    assert rates and all(re.fullmatch(r"\[\d+(\.\d)?, \d+(\.\d)?\]", r) for r in rates)
