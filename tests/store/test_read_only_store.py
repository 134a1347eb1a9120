"""Issue 47 item 5: a store that cannot be written (a read-only mount) is still read; a write
fails with one line saying why. A real read-only mount needs privileges the tests do not
have, so the file system's refusal is what the ATTACH of a read-write open raises
(connection.attach_file)."""

from __future__ import annotations

import duckdb
import pytest

from fragility_tui.store import connection
from fragility_tui.store.connection import StoreReadOnly
from fragility_tui.store.store import Store


@pytest.fixture
def read_only_mount(monkeypatch):
    real = connection.attach_file

    def attach_file(host, path, alias, read_only):
        if not read_only:
            raise duckdb.IOException(f'IO Error: Cannot open file "{path}": Read-only file '
                                     "system")
        return real(host, path, alias, read_only=True)
    monkeypatch.setattr(connection, "attach_file", attach_file)


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


def test_every_read_path_works_on_a_read_only_store(tmp_path, monkeypatch, request):
    """Issue 57 item 3: report, compare (replay), calibrate and export --what report opened
    a write transaction to cache the grid's cube, and failed with "cannot write"."""
    import json

    from fragility_tui.cli import main

    db = tmp_path / "s.duckdb"
    main(["--db", str(db), "simulate", "--models", "3", "--items", "40", "--grid", "g"])
    with Store(db).connect(write=True) as con:  # no packed cube: the read must build it
        con.execute("DELETE FROM cube_cache")
    request.getfixturevalue("read_only_mount")
    out = tmp_path / "report.json"
    for argv in (["report", "--grid", "g", "--boot", "50", "--random-draws", "5", "--json"],
                 ["compare", "synthetic-model-01", "synthetic-model-02", "--grid", "g"],
                 ["export", "--grid", "g", "--what", "report", "--format", "json",
                  "--out", str(out)]):
        assert main(["--db", str(db), *argv]) == 0, argv
    assert json.loads(out.read_text())["grid"]["name"] == "g"


def test_a_newer_or_damaged_schema_on_a_read_only_mount_says_so(tmp_path, request):
    from fragility_tui.errors import InputError

    newer, damaged = tmp_path / "newer.duckdb", tmp_path / "damaged.duckdb"
    for path, value in ((newer, "999"), (damaged, "seven")):
        Store(path)
        con = duckdb.connect(str(path))
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [value])
        con.close()
    request.getfixturevalue("read_only_mount")
    with pytest.raises(InputError, match="schema version 999 is newer"):
        Store(newer)
    with pytest.raises(InputError, match="schema_version is 'seven', not a number"):
        Store(damaged)
