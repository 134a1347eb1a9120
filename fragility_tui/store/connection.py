"""Opening the DuckDB file: waiting out another process's lock, and falling back to a
read-only connection when the file cannot be written (a read-only mount, a file the user
may not write), so reading commands still work and a write says why it cannot happen; the
schema version an open store records; and which part of DuckDB a connection needs."""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import threading
import time
from pathlib import Path

try:
    # DuckDB's engine, the extension module the `duckdb` package re-exports (connect, the
    # connection class, the exceptions: the same objects). Running SQL and fetching rows
    # needs nothing more; the package's Python layer (relations, Arrow scans, its version
    # lookup) costs ~45 ms of start-up, a tenth of a one-shot `report` (docs/scale.md).
    import _duckdb as duckdb
except ImportError:  # should a later duckdb move its engine module elsewhere
    import duckdb

from fragility_tui.errors import InputError, StoreBusyError


class StoreReadOnly(InputError):
    """A write to a store that can only be read (exit 2, naming why)."""


def is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def is_read_only_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "read-only file system" in text or "permission denied" in text


def open_duckdb(path: Path, *, read_only: bool, wait_s: float) -> "StoreConnection":
    """A connection, retrying with jittered back-off while another process holds the lock."""
    deadline = time.monotonic() + wait_s
    # Short waits: a failed ATTACH costs ~0.3 ms, and a fast writer (a small model's run)
    # leaves the file free only briefly between its operations; 250 ms waits starved readers.
    delay = 0.002
    while True:
        try:
            return _attach(Path(path), read_only)
        except duckdb.IOException as exc:
            if not is_lock_error(exc):
                raise
            if time.monotonic() > deadline:
                raise StoreBusyError(f"{path} stayed locked by another process for "
                                     f"{wait_s:.0f} s: {exc}") from exc
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.025)


# A store file is attached to one in-memory DuckDB instance per process, and detached again
# when its last connection closes: DETACH gives the file's lock back as closing a connection
# of its own did, so other processes still take turns on the file, but creating a DuckDB
# instance for every short connection (~10 ms of CPU each: the store opened ~7,000 times in
# a run of the test suite) becomes an ATTACH (~1.5 ms). Connections of one process to one
# file share its attachment, as DuckDB's own instance cache shared an instance.
_lock = threading.Lock()
_host: list = []  # [the instance's connection, the pid that made it]
_attached: dict[str, list] = {}  # file -> [alias, connections open, read_only]
_aliases = itertools.count()


def _forget_in_child() -> None:
    """A forked child never uses its parent's instance, nor frees it: its destructor waits on
    the parent's threads, which a child does not have (it aborted the child at exit)."""
    global _lock
    if _host:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(_host[0]))
    _host.clear()
    _attached.clear()
    _lock = threading.Lock()  # another thread of the parent may have held it


os.register_at_fork(after_in_child=_forget_in_child)


def _host_connection():
    if not _host:
        _host[:] = [duckdb.connect(":memory:"), os.getpid()]
    return _host[0]


def _attach(path: Path, read_only: bool) -> "StoreConnection":
    key = os.path.abspath(path)
    with _lock:
        host = _host_connection()
        entry = _attached.get(key)
        if entry is None:
            alias = f"store_{next(_aliases)}"
            if not _attached:  # spill beside the store, as its own instance did (not in ./.tmp)
                host.execute(f"SET temp_directory = {_literal(key + '.tmp')}")
            attach_file(host, key, alias, read_only)
            entry = _attached[key] = [alias, 0, read_only]
        cursor = host.cursor()
        try:
            cursor.execute(f"USE {entry[0]}")
        except BaseException:
            cursor.close()
            if not entry[1]:
                _detach(host, key)
            raise
        entry[1] += 1
    return StoreConnection(cursor, key)


def attach_file(host, path: str, alias: str, read_only: bool) -> None:
    """The ATTACH itself (a read-only mount refuses it unless read_only: an IOException)."""
    host.execute(f"ATTACH {_literal(path)} AS {alias}" + (" (READ_ONLY)" if read_only else ""))


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _detach(host, key: str) -> None:
    alias = _attached.pop(key)[0]
    host.execute(f"DETACH {alias}")


class StoreConnection:
    """A DuckDB connection to one attached store file (every method of DuckDB's
    connection); `close` gives the file back once no other connection of this process uses
    it."""

    def __init__(self, cursor, key: str):
        self._cursor, self._key = cursor, key

    def __getattr__(self, name):
        return getattr(self._cursor, name)

    def execute(self, *args, **kwargs):
        self._cursor.execute(*args, **kwargs)
        return self

    def close(self) -> None:
        cursor, self._cursor = self._cursor, None
        if cursor is None:
            return
        with _lock:
            try:
                cursor.close()
            finally:
                entry = _attached.get(self._key)
                if entry is not None and _host and _host[1] == os.getpid():
                    entry[1] -= 1
                    if entry[1] <= 0:
                        _detach(_host[0], self._key)


@contextlib.contextmanager
def memory_limit(con, limit: str):
    """DuckDB's memory limit set to `limit` for the block (it spills beyond it), then its
    default again: the setting belongs to the process's one instance, so left set it would
    cap every later operation of the process. (RESET, as the limit reads back rounded;
    nothing else sets it.)"""
    con.execute(f"SET memory_limit = {_literal(limit)}")
    try:
        yield con
    finally:  # on a cursor of its own: `con`'s transaction may have failed, refusing SQL
        restore = con.cursor()
        try:
            restore.execute("RESET memory_limit")
        finally:
            restore.close()


def relational(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """`con`, with the `duckdb` package's Python layer set up: `sql` and the relations it
    returns (`to_arrow_table`, `to_arrow_reader`), and `register` of Arrow data, which the
    engine alone refuses ("Python Arrow objects cannot be scanned"). Importing the package
    adds them to every connection (it patches the connection class); code that calls them
    on a store connection goes through here (tests/store/test_duckdb_engine.py checks)."""
    import duckdb as package  # noqa: F401 - imported for its set-up

    return con


def stored_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The schema version a store records once created or migrated to it; None before."""
    try:
        rows = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
    except duckdb.CatalogException:  # a new store: no meta table yet
        return None
    if not rows:
        return None
    try:
        return int(rows[0][0])
    except (TypeError, ValueError):
        from fragility_tui.errors import InputError

        raise InputError(f"the store's schema_version is {str(rows[0][0])[:40]!r}, not a "
                         "number: not a fragility-tui store, or a damaged one") from None
