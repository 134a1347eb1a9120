"""Opening the DuckDB file: waiting out another process's lock, and falling back to a
read-only connection when the file cannot be written (a read-only mount, a file the user
may not write), so reading commands still work and a write says why it cannot happen; the
schema version an open store records; and which part of DuckDB a connection needs."""

from __future__ import annotations

import random
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


def open_duckdb(path: Path, *, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    """A connection, retrying with jittered back-off while another process holds the lock."""
    deadline = time.monotonic() + wait_s
    delay = 0.005
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if not is_lock_error(exc):
                raise
            if time.monotonic() > deadline:
                raise StoreBusyError(f"{path} stayed locked by another process for "
                                     f"{wait_s:.0f} s: {exc}") from exc
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.25)


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
