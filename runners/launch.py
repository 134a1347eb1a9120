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


def pid_alive(pid: int | None) -> bool:
    """True when `pid` is a live process that looks like a fragility-tui run.

    The command-line check guards against pid reuse after a crash (Linux /proc; elsewhere
    only liveness is checked). A zombie (exited, not yet reaped) counts as dead.
    """
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            status = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if status == "Z":
                return False
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            return False
        return b"fragility" in cmdline
    return True


ACTIVE_STATUSES = ("running", "cancelling")


def effective_status(run: dict) -> str:
    """The run's status as a user should see it: a run recorded as running whose process
    is gone (kill -9, power loss, OOM killer) is `died`; resume it with --resume."""
    status = run.get("status") or "unknown"
    if status in ACTIVE_STATUSES and not pid_alive(run.get("pid")):
        return "died"
    return status
