"""Store.claim_grid (store/grid_claim.py): the grid's check and its creation are one
transaction, so two processes creating one grid with other item sets cannot both pass."""

from __future__ import annotations

import multiprocessing
import sys

import pytest

from fragility_tui.errors import InputError
from fragility_tui.items.item import Item, item_set_hash
from fragility_tui.store.store import Store


def items_of(tag: str, n: int) -> list[Item]:
    return [Item(f"toy/{tag}{k}", "toy", None, f"question {tag}{k}", ("a", "b", "c", "d"), 0)
            for k in range(n)]


def refuse_other_sets(set_hash: str):
    def check(settings):
        if settings is not None and settings["item_set_hash"] != set_hash:
            raise InputError("another item set")
    return check


def claim(store: Store, items: list[Item]) -> int:
    set_hash = item_set_hash(items)
    return store.claim_grid("g", items, positions=None, seed=0, set_hash=set_hash,
                            description="d", meta=None, check=refuse_other_sets(set_hash))


def test_a_refused_claim_leaves_the_store_as_it_was(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    assert claim(store, items_of("a", 3)) == 3
    with pytest.raises(InputError):
        claim(store, items_of("b", 5))
    assert [it.item_uid for it in store.load_items("g")] == [f"toy/a{k}" for k in range(3)]
    assert claim(store, items_of("a", 3)) == 0  # the same set again: nothing new


def test_an_imported_grid_is_checked_by_its_stored_items(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g", item_set_hash=None)
    store.add_items("g", items_of("a", 2))
    seen = []
    store.claim_grid("g", [], positions=None, seed=0, set_hash="x", description="", meta=None,
                     check=seen.append)
    assert seen[0]["item_set_hash"] == item_set_hash(items_of("a", 2))


def _claim_in_a_process(db: str, tag: str, n: int, barrier, results) -> None:
    store = Store(db)
    barrier.wait()
    try:
        claim(store, items_of(tag, n))
        results.put((tag, "claimed"))
    except InputError:
        results.put((tag, "refused"))


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_two_processes_claiming_one_grid_with_other_sets_one_is_refused(tmp_path):
    ctx = multiprocessing.get_context("fork")
    db = str(tmp_path / "s.duckdb")
    Store(db)
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_claim_in_a_process, args=(db, tag, n, barrier, results))
             for tag, n in (("a", 3), ("b", 5))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    outcome = dict(results.get(timeout=5) for _ in procs)
    assert sorted(outcome.values()) == ["claimed", "refused"]
    winner = next(tag for tag, what in outcome.items() if what == "claimed")
    assert {it.item_uid[4] for it in Store(db).load_items("g")} == {winner}
