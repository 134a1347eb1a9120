"""Runs as processes: starting one detached from the terminal, telling whether a recorded
run's process is alive, and watching its progress. Headless and torch-free: the CLI, the
app and the runner share it; a run started here survives the app, the terminal or the SSH
connection closing. (Run records and statuses are the store's: store/runs.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fragility_tui.schemas.events import Progress, RequestRecovered, RequestRetry, read_event
from fragility_tui.store.runs import RunRecord, RunStatus

EVENTS_TAIL_BYTES = 64_000  # read of a run's events file to find its latest progress


def start_detached(argv: list[str], log_path: str | os.PathLike) -> int:
    """Start `fragility-tui ARGV` (argv without the program name) in a new session with
    stdin closed and stdout/stderr appended to `log_path`; returns its pid."""
    return launch_detached(argv, log_path).pid


def launch_detached(argv: list[str], log_path: str | os.PathLike) -> subprocess.Popen:
    """start_detached, keeping the process handle: a launcher that stays up (the app) can
    see a run refused at its start (exit status 2, no run row) and say why."""
    command = [sys.executable, "-m", "fragility_tui.cli", *argv]
    with open_log(log_path) as log:
        return subprocess.Popen(command, close_fds=True, **detached_stdio(log))


def open_log(log_path: str | os.PathLike):
    """A launched process's log, opened for appending (its folder made)."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return open(log_path, "ab")


def detached_stdio(log) -> dict:
    """How a launched process starts (subprocess.Popen's arguments): in a session of its own,
    so it outlives the terminal; stdin closed; stdout and stderr appended to `log`,
    unbuffered, as the log is read while the process runs."""
    return dict(stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})


def failure_line(log_path: str | os.PathLike) -> str:
    """The last non-empty line of a launched process's log: where the CLI says why it
    stopped (`error: ...`)."""
    try:
        lines = Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return next((line for line in reversed(lines) if line.strip()), "(empty log)")


def process_start(pid: int) -> str | None:
    """When process `pid` started (Linux: clock ticks since boot, /proc/PID/stat field 22),
    so that a later check can tell the run's process from another that reused its pid;
    None where the system does not say."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int | None, started: str | None = None) -> bool:
    """True when `pid` is a live process and, when the run recorded its start time, the
    same process (not another one that reused the pid after a crash). A zombie (exited,
    not yet reaped) counts as dead."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by someone else
    stat = Path(f"/proc/{pid}/stat")
    if not stat.is_file():
        return True  # no /proc here: liveness is all we can tell
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    if fields[0] == "Z":
        return False
    # A run recorded before start times were (store schema 1): liveness is all we know.
    return started is None or fields[19] == started


def effective_status(run: RunRecord) -> str:
    """The run's status as a user should see it: a run recorded as running whose process
    is gone (kill -9, power loss, OOM killer), or queued by a process that is gone, is
    `died`; resume it with --resume."""
    status = run.status or "unknown"
    if status in RunStatus.active() and not pid_alive(run.pid, run.pid_started):
        return RunStatus.DIED
    # A run waiting for its device records its pid: killed while it waited, it died too.
    if status == RunStatus.QUEUED and run.pid and not pid_alive(run.pid, run.pid_started):
        return RunStatus.DIED
    return status


# -- watching runs (the app's Runs pane) ----------------------------------------------

def tail_progress(events_path: str | None) -> Progress | None:
    """The latest progress event (started, batch, finished, cancelled) of a run's JSON-lines
    events file; None when there is none yet."""
    return tail_state(events_path)[0]


def tail_state(events_path: str | None) -> tuple[Progress | None, RequestRetry | None]:
    """(the latest progress event, the retry a served run's request waits on): a
    `request_retry` written after that progress event whose request was not answered since
    (`request_recovered`); None for either when there is none. A line that does not read
    (torn, nested past the parser's depth, a NaN or a missing field) is passed over."""
    if not events_path:
        return None, None
    try:
        with open(events_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - EVENTS_TAIL_BYTES))
            # At most the tail: a path naming a device (/dev/zero reports size 0) is not
            # read without end.
            lines = fh.read(EVENTS_TAIL_BYTES).decode("utf-8", "replace").splitlines()
    except OSError:
        return None, None
    answered: set[str] = set()
    retrying = None
    for line in reversed(lines):
        try:
            event = read_event(json.loads(line))
        except (ValueError, RecursionError):  # a partly written last line, a field of the
            continue                              # wrong type, nesting past the parser's depth
        if isinstance(event, RequestRecovered):
            answered.add(event.request)
        elif isinstance(event, RequestRetry):
            if retrying is None and event.request not in answered:
                retrying = event  # the latest still waiting
        elif isinstance(event, Progress):  # a batch: every request before it was answered
            return event, retrying
    return None, retrying


@dataclass(frozen=True)
class RunProgress:
    """A run as a watcher shows it: its record, the status a user should see (a `running`
    run whose process is gone shows as `died`), and its latest progress event folded in."""

    run: RunRecord
    status: str
    done: int
    total: int
    tok_s: float | None
    eta: float | None
    retrying: str | None = None  # a running served run's request waiting to be retried


def run_progress(run: RunRecord) -> RunProgress:
    """The run's record + its latest event: done, total, tokens/s and ETA, and while it
    runs, the request it waits to retry ("retrying item q3, config o0.letter in 2.0 s:
    server said HTTP 503: busy (attempt 2 of 6)")."""
    progress, retry = tail_state(run.events_path)
    event = progress or Progress()
    done = max(event.cells_done or 0, run.cells_done or 0)
    total = event.cells_total or run.cells_total or 0
    status = effective_status(run)
    rate = event.tokens_per_s
    if rate is None and run.seconds:
        rate = (run.tokens or 0) / run.seconds
    eta = event.eta_s if status == RunStatus.RUNNING else None
    retrying = retry.line if retry is not None and status == RunStatus.RUNNING else None
    return RunProgress(run, status, done, total, rate, eta, retrying)


def db_args(db_path: str | None) -> list[str]:
    return ["--db", db_path] if db_path else []


def log_dir(db_path: str | None) -> Path:
    if db_path:
        return Path(db_path).expanduser().resolve().parent / "fragility-logs"
    from platformdirs import user_log_dir

    return Path(user_log_dir("fragility-tui"))
