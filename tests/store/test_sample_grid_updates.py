"""Shipped sample grids reach existing stores: a newer shipped file replaces the older
shipped version, but never a grid a local run wrote into, a user's own grid of the same
name, or a shipped grid the user deleted."""

from __future__ import annotations

import json

import pytest

from fragility_tui.bootstrap import ensure_sample_grids
from fragility_tui.store import sample_grids
from fragility_tui.harness.configs import CONFIG_IDS
from fragility_tui.store.importer import import_long_grid
from fragility_tui.store.sample_grids import load_sample_grids
from fragility_tui.store.store import Store


def write_version(folder, models: list[str]) -> None:
    """A shipped grid 'demo': models x 2 items x 26 configs, one imported run per model."""
    rows = ["model,item,config,correct"]
    rows += [f"{m},q{i},{c},{int(i == 0)}" for m in models for i in range(2) for c in CONFIG_IDS]
    (folder / "demo.csv").write_text("\n".join(rows) + "\n")
    runs = [{"run_id": f"run-{m}", "grid": "demo", "model": m, "status": "finished"}
            for m in models]
    (folder / "demo.provenance.json").write_text(json.dumps({"models": [], "runs": runs}))
    (folder / "manifest.json").write_text(json.dumps({"grids": [{
        "name": "demo", "cells": "demo.csv", "provenance": "demo.provenance.json",
        "synthetic": False, "description": f"demo with {len(models)} models"}]}))


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    folder = tmp_path / "sample_grids"
    folder.mkdir()
    monkeypatch.setattr(sample_grids, "SAMPLE_GRIDS_DIR", folder)
    write_version(folder, ["a"])
    return folder


def models_of(store) -> list[str]:
    return sorted(m["model"] for m in store.list_models("demo"))


def test_a_newer_shipped_version_replaces_the_older_one(shipped, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    assert ensure_sample_grids(store) == ["demo"]
    assert ensure_sample_grids(store) == []  # same file: nothing to do
    write_version(shipped, ["a", "b"])
    assert ensure_sample_grids(store) == ["demo"]
    assert models_of(store) == ["a", "b"]
    assert store.grid_meta("demo")["description"] == "demo with 2 models"
    assert sorted(r.run_id for r in store.runs("demo")) == ["run-a", "run-b"]


def test_a_release_that_only_corrects_the_provenance_reaches_the_store(shipped, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    assert ensure_sample_grids(store) == ["demo"]
    doc = json.loads((shipped / "demo.provenance.json").read_text())
    doc["runs"][0]["events_path"] = "run-a.jsonl"  # e.g. a machine path removed
    (shipped / "demo.provenance.json").write_text(json.dumps(doc))
    assert ensure_sample_grids(store) == ["demo"]
    assert store.get_run("run-a").events_path == "run-a.jsonl"
    assert ensure_sample_grids(store) == []


def test_a_grid_a_local_run_wrote_into_is_kept(shipped, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    ensure_sample_grids(store)
    store.create_run({"grid": "demo", "model": "mine", "status": "finished", "pid": 4242})
    write_version(shipped, ["a", "b"])
    assert ensure_sample_grids(store) == []
    assert models_of(store) == ["a"]


@pytest.mark.parametrize("change", ["cells added", "a cell replaced"])
def test_a_grid_cells_were_written_into_is_kept(shipped, tmp_path, change):
    """Logs imported into a shipped grid (import-log, import-lmeval: no run row of this
    machine) or a cell replaced there: an upgrade would lose them, so the grid stays."""
    store = Store(tmp_path / "s.duckdb")
    ensure_sample_grids(store)
    with store.connect(write=True) as con:
        if change == "cells added":
            con.execute("INSERT INTO cells (grid, model, item_uid, config_id, correct) "
                        "SELECT grid, 'imported', item_uid, config_id, correct FROM cells "
                        "WHERE grid = 'demo' AND model = 'a'")
        else:
            con.execute("UPDATE cells SET correct = NOT correct WHERE grid = 'demo' AND "
                        "item_uid = (SELECT min(item_uid) FROM cells) AND config_id = "
                        "'cloze_qa'")
    write_version(shipped, ["a", "b"])
    assert ensure_sample_grids(store) == []
    assert models_of(store) == ["a"]


def test_a_deleted_shipped_grid_stays_deleted_until_load_samples(shipped, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    ensure_sample_grids(store)
    store.delete_grid("demo")
    assert ensure_sample_grids(store) == [] and not store.has_grid("demo")
    assert load_sample_grids(store) == ["demo"]  # what `fragility-tui load-samples` calls


def test_a_user_grid_of_the_same_name_is_not_touched(shipped, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    own = tmp_path / "own.csv"
    own.write_text("model,item,config,correct\n" + "".join(
        f"mine,x,{c},1\n" for c in CONFIG_IDS))
    import_long_grid(store, own, "demo")
    assert ensure_sample_grids(store) == []
    assert models_of(store) == ["mine"]


def test_a_grid_shipped_before_versions_were_recorded_is_updated(shipped, tmp_path):
    """Stores filled by an older release have no sample_sha256; the grid's source file
    name (sample_grids/<cells>) identifies it as the shipped one."""
    store = Store(tmp_path / "s.duckdb")
    import_long_grid(store, shipped / "demo.csv", "demo", description="old shipped demo")
    with store.connect(write=True) as con:
        con.execute("INSERT INTO meta VALUES ('sample_grids_loaded', ?)", [json.dumps(["demo"])])
    write_version(shipped, ["a", "b"])
    assert ensure_sample_grids(store) == ["demo"]
    assert models_of(store) == ["a", "b"]


def record(store, a: str, b: str, seed: int) -> None:
    store.record_comparison("demo", a=a, b=b, reference="o0.letter", target="observed",
                            seed=seed, scope="population", margin=0.02, chunk=25, live=False,
                            result={"stop": "pool-exhausted", "settled": None, "winner": None,
                                    "items_used": 2, "pool": 2})


def comparisons_of(store) -> list[tuple]:
    with store.connect() as con:
        return con.execute("SELECT * FROM comparisons WHERE grid = 'demo' "
                           "ORDER BY model_1, model_2").fetchall()


@pytest.mark.parametrize("reload", ["upgrade", "load-samples"])
def test_a_newer_version_keeps_the_record_of_first_comparisons(shipped, tmp_path, reload):
    """The record of each pair's first comparison (the guard against seed shopping, issue 58)
    survives the replace, every row as it was: the pairs the new version keeps and one of a
    model it drops (read by nobody until that model comes back)."""
    write_version(shipped, ["a", "b", "c"])
    store = Store(tmp_path / "s.duckdb")
    assert ensure_sample_grids(store) == ["demo"]
    record(store, "a", "b", seed=3)
    record(store, "b", "c", seed=5)
    before = comparisons_of(store)
    assert len(before) == 2
    write_version(shipped, ["a", "b"])  # a newer release: other cells, model c dropped
    loaded = ensure_sample_grids(store) if reload == "upgrade" else load_sample_grids(store)
    assert loaded == ["demo"] and models_of(store) == ["a", "b"]
    assert comparisons_of(store) == before
    # a later comparison at another seed still meets the first one
    rows = store.comparisons("demo", "b", "a", "observed")
    assert [(r["seed"], r["result"]["stop"]) for r in rows] == [(3, "pool-exhausted")]


def test_a_failed_replace_leaves_the_old_grid_and_its_record(shipped, tmp_path, monkeypatch):
    """The record and the shipped provenance are written in the replace's own transaction: a
    write that fails after the old grid was dropped leaves the old version, its record and
    its imported runs, nothing half-written."""
    from fragility_tui.store import cube_cache

    write_version(shipped, ["a", "b"])
    store = Store(tmp_path / "s.duckdb")
    ensure_sample_grids(store)
    record(store, "a", "b", seed=3)
    before = comparisons_of(store)
    write_version(shipped, ["a", "b", "c"])

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    with monkeypatch.context() as patch, pytest.raises(RuntimeError, match="disk full"):
        patch.setattr(cube_cache, "write", fail)  # the last step of write_grid
        ensure_sample_grids(store)
    assert models_of(store) == ["a", "b"] and comparisons_of(store) == before
    assert sorted(r.run_id for r in store.runs("demo")) == ["run-a", "run-b"]
    assert ensure_sample_grids(store) == ["demo"]
    assert models_of(store) == ["a", "b", "c"] and comparisons_of(store) == before
    assert sorted(r.run_id for r in store.runs("demo")) == ["run-a", "run-b", "run-c"]


def test_a_users_import_replace_starts_the_record_afresh(shipped, tmp_path):
    """Only a shipped grid's upgrade keeps it: `import --replace` is a new grid under an old
    name, which starts afresh as a deleted and re-imported one does."""
    store = Store(tmp_path / "s.duckdb")
    import_long_grid(store, shipped / "demo.csv", "demo")
    record(store, "a", "a2", seed=3)
    import_long_grid(store, shipped / "demo.csv", "demo", replace=True)
    assert comparisons_of(store) == []
