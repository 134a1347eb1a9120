"""Atomic file writes: the one way a file the app or the runner writes comes into place.

A reader (another process listing parts, the app tailing a cache, a user opening an export)
sees either the old file or the whole new one, never a partial write: the content goes to a
hidden temporary file beside the target (same folder, so the rename stays on one file system)
and `os.replace` renames it into place, which POSIX and Windows make atomic. A process
killed mid-write (SIGKILL, power loss) leaves its hidden temporary behind; its name carries
the host and pid, so `sweep_stale_temporaries` can remove exactly those whose writer is gone.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import BinaryIO, Callable

from fragility_tui.errors import InputError


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """write(tmp_path), then rename tmp_path onto path; the temporary file never survives a
    failure (the exception is raised, the old file at path is left as it was)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # host and pid in the name: two processes writing the same target never share a
    # temporary file, and a dead writer's leftover is recognisable (sweep_stale_temporaries)
    tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """The text, UTF-8, written atomically to path."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_output(out: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """A file the user named (`export --out`), written by write(binary file): `-` is
    standard output; a FIFO or device is written straight into and a symlink through (its
    target replaced atomically), never replaced by a plain file; a folder is an error; any
    other path is written atomically (its folder created)."""
    if os.fspath(out) == "-":
        write(sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    path = Path(out)
    if path.is_dir():
        raise InputError("is a folder: name a file to write", path=str(out))
    if path.exists() and not path.is_file():  # a FIFO, a device (through a link or not)
        with open(path, "wb") as fh:
            write(fh)
        return
    target = Path(os.path.realpath(path)) if path.is_symlink() else path

    def into(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            write(fh)

    write_atomic(target, into)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def sweep_stale_temporaries(folder: str | os.PathLike) -> int:
    """Remove the hidden temporaries in folder that write_atomic left when its process died
    mid-write: only this host's (a folder shared between nodes holds other hosts' live
    writes, whose pids mean nothing here) and only of pids no longer running. How many."""
    host, removed = socket.gethostname(), 0
    for tmp in Path(folder).glob(".*.tmp"):
        stem, pid, _ = tmp.name.rsplit(".", 2)
        if stem.endswith(f".{host}") and pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed
