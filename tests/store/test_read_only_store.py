"""Issue 47 item 5: a store that cannot be written (a read-only mount) is still read; a write
fails with one line saying why. A real read-only mount needs privileges the tests do not
have, so the file system's refusal is what duckdb.connect raises for a read-write open."""

from __future__ import annotations

import duckdb
import pytest

from fragility_tui.store import connection
from fragility_tui.store.connection import StoreReadOnly
from fragility_tui.store.store import Store


@pytest.fixture
def read_only_mount(monkeypatch):
    real = duckdb.connect

    def connect(path, read_only=False, **kw):
        if not read_only:
            raise duckdb.IOException(f'IO Error: Cannot open file "{path}": Read-only file '
                                     "system")
        return real(path, read_only=True, **kw)
    monkeypatch.setattr(connection.duckdb, "connect", connect)


def test_a_read_only_store_is_read_and_a_write_says_why(tmp_path, monkeypatch, request):
    db = tmp_path / "s.duckdb"
    Store(db).create_grid("g", description="kept")
    request.getfixturevalue("read_only_mount")
    store = Store(db)  # no write on opening (the schema is current)
    assert [g.name for g in store.list_grids()] == ["g"]
    assert store.grid_meta("g")["description"] == "kept"
    with pytest.raises(StoreReadOnly, match="cannot write to the store: .*Read-only file system"):
        store.create_grid("h")
    assert store.read_only and not store.has_grid("h")


def test_a_missing_store_on_a_read_only_mount_is_an_error(tmp_path, read_only_mount):
    with pytest.raises(duckdb.IOException, match="Read-only file system"):
        Store(tmp_path / "new.duckdb")
