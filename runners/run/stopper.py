"""Stopping a run cleanly: SIGINT/SIGTERM set a flag, and `runs cancel` sets the run's
status to `cancelling`; the loop (and a run waiting for its device) checks both between
batches."""

from __future__ import annotations

import signal

from fragility_tui.store.runs import RunStatus
from fragility_tui.store.sink import CellSink


class Stopper:
    """Signal flag + the run row's `cancelling` status, checked between batches."""

    def __init__(self, store: CellSink, run_id: str, notify):
        self.store, self.run_id, self.notify = store, run_id, notify
        self.requested: str | None = None
        self._previous = {}

    def install(self) -> None:
        import threading

        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only (a run inside a worker thread)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # second ctrl+c: stop now
        self.requested = signal.Signals(signum).name
        self.notify(f"{self.requested}: stopping after the current batch"
                    + (" (ctrl+c again to abort now)" if signum == signal.SIGINT else ""))

    def should_stop(self) -> bool:
        if self.requested:
            return True
        run = self.store.get_run(self.run_id)
        if run and run.status == RunStatus.CANCELLING:
            self.requested = "runs cancel"
        return bool(self.requested)
