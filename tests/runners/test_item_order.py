"""A run evaluates its items in a seeded random order (recorded in its spec as
`order_seed`), which a resume keeps: any prefix of a run is a uniform sample of its items,
so the app's provisional figures from a half-written grid are not biased."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.store.store import Store  # noqa: E402
from runners.plan.item_requests import seeded_order  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402
from test_run_loop import spec_for, write_items  # noqa: E402


@dataclass
class _Item:
    item_uid: str
    question: str = "q"


def _uids(todo):
    return [it.item_uid for it, _ in todo]


def test_the_order_depends_only_on_the_seed_and_each_uid():
    todo = [(_Item(f"toy/q{k}", "x" * k), ["o0.letter"]) for k in range(200)]
    order = _uids(seeded_order(todo, 0))
    assert sorted(order) == sorted(_uids(todo))
    assert order == _uids(seeded_order(list(reversed(todo)), 0))  # not the input order
    assert order != _uids(todo) and order != _uids(list(reversed(todo)))  # not length order
    assert order != _uids(seeded_order(todo, 1))
    # what a resume or a shard has left keeps the first session's relative order
    rest = [pair for k, pair in enumerate(todo) if k % 3]
    assert _uids(seeded_order(rest, 0)) == [u for u in order if int(u[5:]) % 3]
    # a prefix is a sample, not the low end of the file: its mean index is near the middle
    first = [int(u[5:]) for u in order[:100]]
    assert 70 < sum(first) / len(first) < 130


def test_a_run_records_its_order_and_a_resume_keeps_it(tiny_folder, tmp_path, monkeypatch):
    items = write_items(tmp_path / "items.jsonl", 6)
    store = Store(tmp_path / "s.duckdb")
    written: list[list[str]] = []
    original_write, original_score = Store.write_cells, Run.score_chunk

    def record(self, grid, rows, con=None):
        if con is None:  # the outer call (it re-enters itself inside its transaction)
            written.append(list(dict.fromkeys(r.item_uid for r in rows)))
        return original_write(self, grid, rows, con=con)

    calls = {"n": 0}

    def crash_on_second(self, *args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated crash")
        return original_score(self, *args)

    monkeypatch.setattr(Store, "write_cells", record)
    monkeypatch.setattr(Run, "score_chunk", crash_on_second)
    run = Run(spec_for(tiny_folder, items, configs=["o0.letter"], seed=3), store, display="none",
              events_path=str(tmp_path / "ev.jsonl"))
    with pytest.raises(RuntimeError):
        run.execute()
    spec = RunSpec.from_dict(store.get_run(run.run_id).spec)
    assert spec.order_seed == 3  # recorded with the run
    monkeypatch.setattr(Run, "score_chunk", original_score)
    assert Run(spec, store, run_id=run.run_id, display="none").execute() == "finished"

    uids = [it.item_uid for it in store.load_items("g")]
    expected = _uids(seeded_order([(_Item(u), None) for u in uids], 3))
    assert [u for batch in written for u in batch] == expected
    assert expected != uids  # a shuffled order, not the file's
