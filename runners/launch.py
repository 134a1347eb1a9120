"""Start a run detached from the terminal, and check whether a run's process is alive.

Torch-free: the TUI imports this to start `fragility-tui run ...` in its own session, so the
run survives the TUI, the terminal or the SSH connection closing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def start_detached(argv: list[str], log_path: str | os.PathLike) -> int:
    """Start `fragility-tui ARGV` (argv without the program name) in a new session with
    stdin closed and stdout/stderr appended to `log_path`; returns its pid."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "fragility_tui.cli", *argv]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, close_fds=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return proc.pid


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


ACTIVE_STATUSES = ("running", "cancelling")


def effective_status(run: dict) -> str:
    """The run's status as a user should see it: a run recorded as running whose process
    is gone (kill -9, power loss, OOM killer) is `died`; resume it with --resume."""
    status = run.get("status") or "unknown"
    if status in ACTIVE_STATUSES and not pid_alive(run.get("pid"), run.get("pid_started")):
        return "died"
    return status
