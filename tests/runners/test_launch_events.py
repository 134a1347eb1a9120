"""Torch-free runner pieces: detached start, liveness, effective status, events, display,
and that the CLI's run/runs commands do not import torch until they run."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

from runners.run.events import Display, EventLog, choose_display, read_events
from fragility_tui.processes import effective_status, pid_alive, process_start, start_detached
from fragility_tui.store.runs import RunRecord

REPO = Path(__file__).resolve().parents[2]


def test_start_detached_runs_in_its_own_session_and_logs(tmp_path):
    log = tmp_path / "logs" / "run.log"
    pid = start_detached(["runs", "list", "--db", str(tmp_path / "s.duckdb")], log)
    assert os.getsid(pid) == pid  # a new session: no controlling terminal to lose
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("detached command did not finish")
    assert "no runs recorded" in log.read_text()


def test_effective_status_marks_dead_running_runs():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not pid_alive(dead.pid)
    assert effective_status(RunRecord("r", status="running", pid=dead.pid)) == "died"
    assert effective_status(RunRecord("r", status="finished", pid=dead.pid)) == "finished"
    # A live process is the run only if it started when the run recorded: whatever the
    # folder the project was cloned into, another process that reused the pid is not it.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = process_start(other.pid)
        assert started is not None and pid_alive(other.pid, started)
        assert not pid_alive(other.pid, str(int(started) - 1))  # the pid's earlier owner
        assert effective_status(RunRecord("r", status="running", pid=other.pid,
                                          pid_started=started)) == "running"
        assert effective_status(RunRecord("r", status="running", pid=other.pid,
                                          pid_started="1")) == "died"
    finally:
        other.kill()
        other.wait()


def test_event_log_appends_json_lines_and_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "ev.jsonl"
    log = EventLog(path, "r1")
    log.emit("started", grid="g", models=["m"], items=1, configs=["o0.letter"],
             cells_total=1, cells_done=0)
    log.close()
    with open(path, "a") as fh:
        fh.write('{"event": "batch", "run_')  # a writer killed mid-line
    events = read_events(path)
    assert [e["event"] for e in events] == ["started"]
    assert events[0]["run_id"] == "r1" and "time" in events[0]


def test_display_modes():
    record = {"event": "batch", "run_id": "r", "model": "m\x1b[31m", "cells_done": 5,
              "cells_total": 10, "tokens_per_s": 12.0, "elapsed_s": 3.0, "eta_s": 3.0}
    out = io.StringIO()
    Display("plain", out).show(record)
    assert "5/10 cells" in out.getvalue() and out.getvalue().endswith("\n")
    quiet = io.StringIO()
    Display("none", quiet).show(record)
    assert quiet.getvalue() == ""
    assert choose_display(None, io.StringIO()) == "plain"  # not a terminal
    assert choose_display("full", io.StringIO()) == "full"


def test_run_commands_import_no_torch_until_they_run():
    code = ("import sys; from fragility_tui.cli import build_parser; build_parser(); "
            "import fragility_tui.commands.run, fragility_tui.commands.runs, fragility_tui.processes, "
            "runners.run.events; "
            "bad = [m for m in ('torch', 'transformers', 'optimum') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_runs_show_of_an_unknown_run_is_bad_input(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fragility_tui.cli", "runs", "show", "nope",
                           "--db", str(tmp_path / "s.duckdb")], capture_output=True, text=True,
                          cwd=REPO)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "nope" in proc.stderr
