"""Issue 47 item 4: a --ray launch without --out-parts writes its parts into a folder of its
own, keyed by the store and the launch's run id (not by the grid name, which every store
shared and which made `--grid ../../x` a path), and removes it after a successful merge."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray")

from fragility_tui import settings  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from runners.cluster.launcher import Launch  # noqa: E402
from runners.run.loop import RunSpec  # noqa: E402
from test_run_loop import write_items  # noqa: E402


def launch(store, items, grid="g", folder=None) -> Launch:
    spec = RunSpec(models=["unused-model"], items=[str(items)], grid=grid, per_benchmark=None,
                   threads=1, configs=["o0.letter"])
    return Launch(spec, store, address=None, shards=1, folder=folder, gpus_per_task=None)


def test_each_launch_has_its_own_parts_folder_under_the_data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    items = write_items(tmp_path / "items.jsonl", 2)
    a, b = Store(tmp_path / "a.duckdb"), Store(tmp_path / "b.duckdb")
    folders = [launch(a, items).folder, launch(b, items).folder, launch(a, items).folder]
    assert len(set(folders)) == 3  # another store, and the same store's next launch
    assert folders[0].parent == folders[2].parent != folders[1].parent  # keyed by store
    root = (settings.data_dir() / "parts").resolve()
    escaping = launch(a, items, grid="../../../x").folder.resolve()
    assert escaping.is_relative_to(root) and "x" != escaping.name
    assert all(f.resolve().is_relative_to(root) for f in folders)


def test_a_finished_launch_removes_its_own_folder_only(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    items = write_items(tmp_path / "items.jsonl", 2)
    store = Store(tmp_path / "a.duckdb")
    own = launch(store, items)
    (own.folder / "cells").mkdir(parents=True)
    (own.folder / "cells" / "r-000001.parquet").write_bytes(b"x")
    other = launch(store, items)  # another launch of the same store, still running
    (other.folder / "cells").mkdir(parents=True)
    own.clean_up()
    assert not own.folder.exists() and other.folder.exists()
    other.clean_up()
    assert not other.folder.parent.exists()  # the store's folder goes with its last launch
    shared = launch(store, items, folder=str(tmp_path / "parts"))
    (shared.folder / "cells").mkdir(parents=True)
    shared.clean_up()
    assert (shared.folder / "cells").is_dir()  # --out-parts is the user's folder
