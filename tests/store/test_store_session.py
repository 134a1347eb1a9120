"""Store.session(): the reads of one command on one connection (each open costs ~20 ms of
`report`'s time), and Store.model_costs without the full scan on a grid with no timing."""

from __future__ import annotations

import pytest

from fragility_tui.store.store import CellRow, Store
from fragility_tui.items.item import Item


def _store(tmp_path, *, timed: bool) -> Store:
    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    store.add_items("g", [Item(f"b/q{k}", "b", None, f"q{k}", ("a", "b", "c", "d"), 0)
                          for k in range(3)])
    rows = [CellRow(m, f"b/q{k}", "o0.letter", bool(k % 2), 0) for m in ("m1", "m2")
            for k in range(3)]
    if timed:
        rows[0] = CellRow("m1", "b/q0", "o0.letter", False, 0, tokens=30, ms=900.0)
    store.write_cells("g", rows)
    return store


def _count_opens(store, monkeypatch) -> list:
    opened = []
    real = store._open

    def counting():
        opened.append(1)
        return real()

    monkeypatch.setattr(store, "_open", counting)
    return opened


def test_a_session_reads_and_writes_on_one_connection(tmp_path, monkeypatch):
    store = _store(tmp_path, timed=False)
    opened = _count_opens(store, monkeypatch)
    with store.session():
        cube = store.load_cube("g")  # a write transaction (it packs the cube)
        with store.session():  # nested: the outer one's connection
            store.grid_meta("g")
        store.near_tie_mask("g", cube)
        store.model_costs("g")
    assert len(opened) == 1
    store.grid_meta("g")  # after the block: a connection of its own, closed again
    assert len(opened) == 2


def test_a_failed_write_inside_a_session_rolls_back_and_the_session_goes_on(tmp_path):
    store = _store(tmp_path, timed=False)
    with store.session():
        with pytest.raises(RuntimeError):
            with store.connect(write=True) as con:
                con.execute("DELETE FROM cells WHERE grid = 'g'")
                raise RuntimeError("boom")
        assert store.count_cells("g") == 6
    assert store.count_cells("g") == 6


def test_costs_of_a_grid_without_timing_are_empty_and_read_as_none(tmp_path):
    assert _store(tmp_path, timed=False).model_costs("g") == {}


def test_costs_of_a_timed_grid_cover_every_model(tmp_path):
    costs = _store(tmp_path, timed=True).model_costs("g")
    assert costs["m1"] == {"seconds_per_item": pytest.approx(0.3), "tokens_per_item": 10.0}
    assert costs["m2"] == {"seconds_per_item": None, "tokens_per_item": None}


def test_a_store_opened_for_a_session_checks_its_schema_on_that_connection(tmp_path,
                                                                           monkeypatch):
    _store(tmp_path, timed=False)
    opened = []
    real = Store._open
    monkeypatch.setattr(Store, "_open", lambda self: opened.append(1) or real(self))
    store = Store(tmp_path / "s.duckdb", session=True)
    with store.session():  # adopts the connection the schema check used
        store.load_cube("g")
        store.grid_meta("g")
    assert len(opened) == 1
    with store.session():  # a later block opens its own
        store.grid_meta("g")
    assert len(opened) == 2


def test_a_session_that_reads_nothing_opens_nothing(tmp_path, monkeypatch):
    store = _store(tmp_path, timed=False)
    opened = _count_opens(store, monkeypatch)
    with store.session():
        pass
    assert opened == []


def test_report_opens_the_store_once(tmp_path, monkeypatch):
    """The whole command: schema check, cube, costs, near-ties and flags on one connection."""
    import io
    from contextlib import redirect_stdout

    from fragility_tui import cli

    _store(tmp_path, timed=True)
    opened = []
    real = Store._open
    monkeypatch.setattr(Store, "_open", lambda self: opened.append(1) or real(self))
    with redirect_stdout(io.StringIO()) as out:
        assert cli.main(["report", "--grid", "g", "--json", "--boot", "20", "--random-draws",
                         "5", "--db", str(tmp_path / "s.duckdb")]) == 0
    assert '"spec_version"' in out.getvalue() and len(opened) == 1
