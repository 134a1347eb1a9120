"""Why a run stopped: the error that is not the user's input, and its one-line reason."""

from __future__ import annotations

import errno

from fragility_tui.errors import InputError


class RunFailed(Exception):
    """A run stopped by an error that is not the user's input (out of memory even at the
    smallest budget, disk full, ...); runners.run.loop records it as the run's failure."""


def failure_reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC or "no space left" in str(exc).lower():
        return f"disk full: {exc}"
    if isinstance(exc, (InputError, RunFailed)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
