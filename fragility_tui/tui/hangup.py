"""Ending the app when its terminal goes: SSH dropped, tmux killed, window closed.

Three ways a terminal goes, each reproduced in tests/tui/test_hangup.py:
- SIGHUP or SIGTERM: by default they kill the process, but a shell that ran the app with
  SIGHUP ignored (`trap '' HUP`, nohup, some job runners) leaves it alive;
- the session leader dies and the kernel hangs the terminal up: the app is no longer in the
  terminal's session (`tcgetpgrp` fails), its reads give EOF or EIO, and Textual's input
  thread keeps selecting on a descriptor that is always "readable";
- the app exits while a worker thread is still computing (a calibration): Python joins the
  thread pool's threads at exit, so the process lingers at full CPU until the work ends.

The guard turns each into an exit within about a second: signals and a lost terminal ask the
app to exit and arm a fallback that ends the process if the event loop cannot, and
`end_process` ends it without waiting for worker threads. Runs are separate processes in
their own session (fragility_tui.processes) and keep going; a store write cut short is rolled back
by DuckDB's write-ahead log, as after a kill.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading

POLL_S = 0.25  # how often the terminal is checked: one syscall, negligible
GRACE_S = 1.0  # time the app gets to restore the terminal before the process is ended
HANGUP_EXIT = 129  # 128 + SIGHUP, as a shell reports a hung-up job


def terminal_lost(fd: int) -> bool:
    """True once `fd` is no longer a terminal of this process's session: after a hang-up
    `tcgetpgrp` fails (ENOTTY or EIO) instead of naming the foreground process group."""
    try:
        os.tcgetpgrp(fd)
    except OSError:
        return True
    return False


def end_process(code: int) -> None:
    """Flush what can be flushed and end the process now, without joining worker threads."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the terminal may be gone
            pass
    os._exit(code)


class HangupGuard:
    """Installed once the app's event loop runs (on mount), only for a real terminal."""

    def __init__(self, app, fd: int | None = None):
        self.app = app
        self.fd = sys.__stdin__.fileno() if fd is None else fd
        self.ending = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> None:
        self.loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):  # replaces SIG_IGN inherited from a shell
            self.loop.add_signal_handler(sig, self.end, 128 + sig)
        if os.isatty(self.fd):
            threading.Thread(target=self._watch, name="terminal-watch", daemon=True).start()

    def _watch(self) -> None:
        while not self.ending.wait(POLL_S):
            if terminal_lost(self.fd):
                self.loop.call_soon_threadsafe(self.end, HANGUP_EXIT)
                self._arm_fallback(HANGUP_EXIT)  # the loop itself may be stuck writing
                return

    def end(self, code: int) -> None:
        """On the event loop: ask the app to exit; end the process if it has not within
        GRACE_S (a worker holding the GIL, a write blocked on a dead terminal)."""
        if self.ending.is_set():
            return
        self.ending.set()
        self._arm_fallback(code)
        self.app.exit(return_code=code)

    def _arm_fallback(self, code: int) -> None:
        timer = threading.Timer(GRACE_S, end_process, (code,))
        timer.daemon = True
        timer.start()
