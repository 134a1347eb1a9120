"""The app ends within 2 s when its terminal goes (issue 22 item 6), on a real pty.

Each case is the app as `fragility-tui` starts it, on a first start (loading the shipped grids
in a worker thread, so it is busy), in a pseudo-terminal this test holds. Before the guard,
SIGHUP and SIGTERM left Textual 8.2.8's app running, and so did a hung-up terminal when the
shell had ignored SIGHUP (tmux, ssh, nohup-like job runners).
"""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time

import pytest

from helpers import REPO

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty and /proc semantics")

DEADLINE_S = 2.0


def _pump(fd: int, seconds: float) -> bytes:
    out, end = b"", time.monotonic() + seconds
    while time.monotonic() < end:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


def _until_started(fd: int, timeout: float = 15.0) -> bytes:
    """The terminal's output until the app has taken the alternate screen (its first frame
    follows at once; it is still loading the shipped grids in a worker), and 0.2 s more.
    Not a fixed 4 s: the four cases spent ~10 s of them idle."""
    out, end = b"", time.monotonic() + timeout
    while b"\x1b[?1049h" not in out and time.monotonic() < end:
        out += _pump(fd, 0.05)
    return out + _pump(fd, 0.2)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, reap: bool) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < DEADLINE_S + 3:
        if reap and os.waitpid(pid, os.WNOHANG)[0] or not reap and _gone(pid):
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def _spawn(argv: list[str], tmp_path) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session of its own with the pty as controlling terminal
        os.environ.update(TERM="xterm-256color", PYTHONPATH=str(REPO),
                          XDG_DATA_HOME=str(tmp_path / "data"))
        os.chdir(REPO)
        os.execv(argv[0], argv)
    return pid, fd


def _app_argv(tmp_path) -> list[str]:
    return [sys.executable, "-m", "fragility_tui.cli", "--db", str(tmp_path / "s.duckdb")]


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_signal_ends_the_app_and_restores_the_terminal(tmp_path, sig):
    pid, fd = _spawn(_app_argv(tmp_path), tmp_path)
    try:
        first = _until_started(fd)
        assert b"\x1b[?1049h" in first, first[-300:]  # the app took the alternate screen
        os.kill(pid, sig)
        took = None
        start, tail = time.monotonic(), b""
        while time.monotonic() - start < DEADLINE_S + 3:
            tail += _pump(fd, 0.05)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                took = time.monotonic() - start
                break
        assert took is not None and took < DEADLINE_S, f"still running after {DEADLINE_S} s"
        assert os.waitstatus_to_exitcode(status) == 128 + sig
        assert b"\x1b[?1049l" in tail  # alternate screen left: the terminal is usable again
    finally:
        _kill(pid)
        os.close(fd)


def test_a_closed_terminal_ends_the_app(tmp_path):
    pid, fd = _spawn(_app_argv(tmp_path), tmp_path)
    try:
        _until_started(fd)
        os.close(fd)
        took = _wait_gone(pid, reap=True)
        assert took is not None and took < DEADLINE_S
    finally:
        _kill(pid)


def test_a_hung_up_terminal_ends_the_app_even_with_sighup_ignored(tmp_path):
    """The shell that ran the app ignored SIGHUP and dies: the kernel hangs the terminal up."""
    app_cmd = " ".join(_app_argv(tmp_path))
    shell, fd = _spawn(["/bin/sh", "-c", f"trap '' HUP; {app_cmd}; sleep 60"], tmp_path)
    app = None
    try:
        _until_started(fd)
        app = _find_child(shell)
        assert app is not None, "the app did not start"
        os.kill(shell, signal.SIGKILL)
        os.waitpid(shell, 0)
        took = _wait_gone(app, reap=False)
        assert took is not None and took < DEADLINE_S, "the app outlived its terminal"
    finally:
        os.close(fd)
        if app is not None:
            _kill(app)


def _find_child(parent: int) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == parent:
                        return int(entry)
            except (FileNotFoundError, ProcessLookupError):
                continue
    return None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
