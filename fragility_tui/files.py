"""Atomic file writes: the one way a file the app or the runner writes comes into place.

A reader (another process listing parts, the app tailing a cache, a user opening an export)
sees either the old file or the whole new one, never a partial write: the content goes to a
hidden temporary file beside the target (same folder, so the rename stays on one file system)
and `os.replace` renames it into place, which POSIX and Windows make atomic.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """write(tmp_path), then rename tmp_path onto path; the temporary file never survives a
    failure (the exception is raised, the old file at path is left as it was)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # pid in the name: two processes writing the same target never share a temporary file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """The text, UTF-8, written atomically to path."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
