"""Store-less workers (`run --out-parts DIR`) and `merge`: shards written as Parquet parts
and merged equal one single-process run cell for cell; merging is idempotent; a rerun
resumes; parts that would mix seeds, item sets or settings are refused with the file named."""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.errors import InputError  # noqa: E402
from fragility_tui.store.merge import merge_parts  # noqa: E402
from fragility_tui.store.parts import PartsStore, visible_files  # noqa: E402
from fragility_tui.store.store import CellRow, Store  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402
from cli_process import cli_popen  # noqa: E402
from helpers import process_memory_limit, run_cli  # noqa: E402
from test_run_loop import assert_same_cells, cells_of, spec_for, write_items  # noqa: E402

CONFIGS = ["o0.letter", "o2.digit", "cloze_qa"]


@pytest.fixture(scope="module")
def whole_and_parts(tiny_folder, tmp_path_factory):
    """One whole run into a store, and the same spec as 2 shards into one parts folder."""
    tmp = tmp_path_factory.mktemp("parts")
    items = write_items(tmp / "items.jsonl", 6)
    whole = Store(tmp / "whole.duckdb")
    assert Run(spec_for(tiny_folder, items, configs=CONFIGS), whole,
               display="none").execute() == "finished"
    folder = tmp / "parts"
    for i in range(2):
        run = Run(spec_for(tiny_folder, items, configs=CONFIGS, shard=[i, 2]),
                  PartsStore(folder), display="none")
        assert run.execute() == "finished"
    return tmp, items, whole, folder


def test_two_shards_merged_equal_one_whole_run(whole_and_parts, tmp_path):
    _, _, whole, folder = whole_and_parts
    assert len(visible_files(folder / "runs", "*.json")) == 2
    assert len(visible_files(folder / "items", "*.parquet")) == 2
    assert visible_files(folder / "cells", "*.parquet")
    assert not list(folder.rglob(".*"))  # no temporary file left behind
    store = Store(tmp_path / "merged.duckdb")
    limit = process_memory_limit()
    summary = merge_parts(store, [folder], "g")
    assert process_memory_limit() == limit  # the merge's 1 GB cap is not left on the process
    assert summary["cells_added"] == 6 * len(CONFIGS) == summary["cells"]
    assert_same_cells(cells_of(store, "g"), cells_of(whole, "g"))
    assert [it.item_uid for it in store.load_items("g")] == [
        it.item_uid for it in whole.load_items("g")]  # sampled order, as one run gives
    assert store.grid_meta("g")["item_set_hash"] == whole.grid_meta("g")["item_set_hash"]
    cube = store.load_cube("g")  # packed by the merge: equal to one read from the cells
    with store.connect() as con:
        models, configs, bits, present = store.cube_from_cells(con, "g")
    assert (cube.models, cube.configs) == (tuple(models), tuple(configs))
    assert (cube.bits == bits).all() and (cube.present == present).all() and present.all()
    # each worker's run keeps its own provenance and sessions
    runs = store.runs("g")
    assert sorted(r.spec["shard"][0] for r in runs) == [0, 1]
    assert all(r.status == "finished" and r.provenance["sessions"] for r in runs)
    (model,) = store.list_models("g")
    assert model["fingerprint"] == whole.list_models("g")[0]["fingerprint"]
    # idempotent: again, and with a copy of every part beside the originals
    assert merge_parts(store, [folder], "g")["cells_added"] == 0
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    for part in visible_files(copy / "cells", "*.parquet"):
        part.rename(part.with_name("dup-" + part.name))
    assert merge_parts(store, [folder, copy], "g")["cells_added"] == 0
    assert store.count_cells("g") == 6 * len(CONFIGS)


def test_one_shard_then_the_other_through_the_cli(whole_and_parts, tmp_path):
    _, _, whole, folder = whole_and_parts
    db = tmp_path / "cli.duckdb"
    first, second = tmp_path / "a", tmp_path / "b"
    for target in (first, second):
        (target / "cells").mkdir(parents=True)
        for sub in ("runs", "items"):
            shutil.copytree(folder / sub, target / sub)
    runs = sorted(p.stem for p in visible_files(folder / "runs", "*.json"))
    for part in visible_files(folder / "cells", "*.parquet"):
        target = first if part.name.startswith(runs[0]) else second
        shutil.copy(part, target / "cells" / part.name)
    import pyarrow.parquet as pq

    in_first = sum(pq.read_metadata(p).num_rows for p in visible_files(first / "cells", "*"))
    proc = run_cli("merge", str(first), "--grid", "g", "--json", db=db, check=True)
    assert 0 < json.loads(proc.stdout)["cells_added"] == in_first < 6 * len(CONFIGS)
    proc = run_cli("merge", str(second), "--grid", "g", db=db, check=True)
    assert "new cell(s)" in proc.stdout
    assert_same_cells(cells_of(Store(db), "g"), cells_of(whole, "g"))


def test_a_rerun_skips_the_cells_its_parts_hold(tiny_folder, whole_and_parts, tmp_path):
    _, items, _, folder = whole_and_parts
    again = tmp_path / "again"
    shutil.copytree(folder, again)
    before = visible_files(again / "cells", "*.parquet")
    run = Run(spec_for(tiny_folder, items, configs=CONFIGS, shard=[0, 2]), PartsStore(again),
              display="none")
    assert run.execute() == "finished"
    assert visible_files(again / "cells", "*.parquet") == before  # nothing new to write
    assert PartsStore(again).get_run(run.run_id).cells_done == \
        PartsStore(again).get_run(run.run_id).cells_total
    events = (again / "events" / f"{run.run_id}.jsonl").read_text()
    assert '"finished"' in events


def _edit_run(folder, edit):
    path = visible_files(folder / "runs", "*.json")[0]
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def test_parts_that_would_mix_settings_are_refused(whole_and_parts, tmp_path):
    _, _, _, folder = whole_and_parts
    store = Store(tmp_path / "s.duckdb")
    bad_seed = tmp_path / "seed"
    shutil.copytree(folder, bad_seed)
    path = _edit_run(bad_seed, lambda d: d["provenance"].update(seed=7))
    with pytest.raises(InputError, match="seed") as err:
        merge_parts(store, [bad_seed], "g")
    assert path.name in str(err.value) or "seed" in str(err.value)
    assert not store.has_grid("g")  # nothing written

    other = tmp_path / "fp"
    shutil.copytree(folder, other)
    name = next(iter(json.loads(visible_files(other / "runs", "*.json")[0].read_text())["models"]))
    _edit_run(other, lambda d: d["models"][name]["fingerprint"].update(dtype="bf16"))
    with pytest.raises(InputError, match="other settings"):
        merge_parts(store, [other], "g")
    assert not store.has_grid("g")

    merge_parts(store, [folder], "g")  # the grid now exists with seed 0
    reseeded = tmp_path / "reseeded"
    shutil.copytree(folder, reseeded)
    for p in visible_files(reseeded / "runs", "*.json"):
        doc = json.loads(p.read_text())
        doc["provenance"]["seed"] = 3
        p.write_text(json.dumps(doc))
    cells = store.count_cells("g")
    with pytest.raises(InputError, match="seed 0"):
        merge_parts(store, [reseeded], "g")
    assert store.count_cells("g") == cells


def test_bad_parts_name_the_file(whole_and_parts, tmp_path):
    _, _, _, folder = whole_and_parts
    store = Store(tmp_path / "s.duckdb")
    with pytest.raises(InputError, match="not a parts folder"):
        merge_parts(store, [tmp_path], "g")
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    part = visible_files(broken / "cells", "*.parquet")[0]
    part.write_bytes(b"not parquet")
    with pytest.raises(InputError, match="cannot read the cells part") as err:
        merge_parts(store, [broken], "g")
    assert part.name in str(err.value)
    stray = tmp_path / "stray"
    shutil.copytree(folder, stray)
    run_file = visible_files(stray / "runs", "*.json")[0]
    run_file.unlink()
    with pytest.raises(InputError, match="has no record in runs/"):
        merge_parts(store, [stray], "g")
    (stray / "runs" / "x.json").write_text("{not json")
    with pytest.raises(InputError, match="x.json:1"):
        merge_parts(store, [stray], "g")
    assert store.list_grids() == []
    proc = run_cli("merge", str(tmp_path / "nowhere"), "--grid", "g", db=tmp_path / "c.duckdb")
    assert proc.returncode == 2 and "not a parts folder" in proc.stderr


def test_a_worker_killed_mid_run_then_rerun_completes_the_whole_grid(tiny_folder, tmp_path):
    """The CLI as a cluster node runs it: no store is touched; SIGKILL after a committed
    batch, the same command again (resume = rerun), then merge: the single-process grid."""
    import os
    import signal
    import subprocess
    import time

    from test_run_loop import REPO, wait_for_batches

    items = write_items(tmp_path / "items.jsonl", 8)
    common = ["--model", str(tiny_folder), "--items", str(items), "--per-benchmark", "0",
              "--batch-size", "1", "--threads", "1", "--display", "none", "--grid", "g",
              "--configs", ",".join(CONFIGS), "--prompt-mode", "chat"]
    whole_db = tmp_path / "whole.duckdb"  # the single-process run, in this process
    assert Run(RunSpec(models=[str(tiny_folder)], items=[str(items)], grid="g",
                       per_benchmark=None, batch_size=1, threads=1, configs=CONFIGS,
                       prompt_mode="chat"), Store(whole_db), display="none",
               events_path=str(tmp_path / "whole.jsonl")).execute() == "finished"
    folder, never = tmp_path / "parts", tmp_path / "never.duckdb"
    worker = [*common, "--out-parts", str(folder), "--shard", "0/1"]
    env = {"FRAGILITY_TUI_DB": str(never)}
    proc = cli_popen(["run", *worker], cwd=REPO, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, env={**os.environ, **env})
    deadline = time.monotonic() + 120
    while not list(folder.glob("events/*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert wait_for_batches(next(folder.glob("events/*.jsonl")), 2, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    held = sum(1 for _ in visible_files(folder / "cells", "*.parquet"))
    assert 0 < held < 8  # whole parts only: a write cut by the kill stays hidden
    assert run_cli("run", *worker, env=env, timeout=300).returncode == 0
    assert not list(folder.rglob(".*.tmp"))  # and the rerun removed it, if there was one
    assert not never.exists()  # a worker writes no store
    db = tmp_path / "merged.duckdb"
    run_cli("merge", str(folder), "--grid", "g", db=db, check=True)
    assert_same_cells(cells_of(Store(db), "g"), cells_of(Store(whole_db), "g"))
    assert len(Store(db).runs("g")) == 2  # the killed run and its rerun, both recorded


def test_a_part_written_while_merging_waits_for_the_next_merge(whole_and_parts, tmp_path,
                                                               monkeypatch):
    """Workers keep writing while a launcher merges: a part that appears after the merge
    listed the folder (its run record read too late to account for it) is left for later."""
    from fragility_tui.store import merge

    _, _, whole, folder = whole_and_parts
    live = tmp_path / "live"
    shutil.copytree(folder, live)
    late_run = visible_files(live / "runs", "*.json")[1]
    late_parts = [p for p in visible_files(live / "cells", "*.parquet")
                  if p.name.startswith(late_run.stem)]
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for part in late_parts:
        part.rename(hidden / part.name)
    full = json.loads(late_run.read_text())
    late_run.write_text(json.dumps({**full, "models": {}}))  # before it loaded its model
    real_read_json = merge.read_json

    def read_json_while_a_worker_writes(path):
        doc = real_read_json(path)
        if path.name == late_run.name:  # just after: it records its model, commits a batch
            late_run.write_text(json.dumps(full))
            for part in visible_files(hidden, "*.parquet"):
                part.rename(live / "cells" / part.name)
        return doc

    monkeypatch.setattr(merge, "read_json", read_json_while_a_worker_writes)
    store = Store(tmp_path / "s.duckdb")
    first = merge_parts(store, [live], "g")
    assert 0 < first["cells_added"] < 6 * len(CONFIGS)
    second = merge_parts(store, [live], "g")
    assert first["cells_added"] + second["cells_added"] == 6 * len(CONFIGS)
    assert_same_cells(cells_of(store, "g"), cells_of(whole, "g"))


def test_margins_travel_through_parts_and_older_parts_merge_with_nulls(whole_and_parts,
                                                                       tmp_path):
    """margin and near_tie go from a worker's parts into the merged store as a direct
    run writes them; a part written before those columns existed still merges (NULLs)."""
    import pyarrow.parquet as pq

    _, _, whole, folder = whole_and_parts
    store = Store(tmp_path / "merged.duckdb")
    merge_parts(store, [folder], "g")
    query = "SELECT model, item_uid, config_id, margin, near_tie FROM cells WHERE grid = 'g'"
    with store.connect() as con:
        merged = {r[:3]: r[3:] for r in con.execute(query).fetchall()}
    with whole.connect() as con:
        direct = {r[:3]: r[3:] for r in con.execute(query).fetchall()}
    assert merged.keys() == direct.keys()
    for key, (margin, near) in merged.items():
        assert margin is not None and near is not None, key
        assert margin == pytest.approx(direct[key][0], abs=1e-4) and near == direct[key][1]
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    for part in visible_files(old / "cells", "*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["margin", "near_tie"]), part)
    older = Store(tmp_path / "older.duckdb")
    assert merge_parts(older, [old], "g")["cells_added"] == 6 * len(CONFIGS)
    with older.connect() as con:
        assert con.execute("SELECT count(*) FROM cells WHERE margin IS NULL AND "
                           "near_tie IS NULL").fetchall()[0][0] == 6 * len(CONFIGS)


def test_parts_merge_into_a_grid_that_holds_imported_configs(whole_and_parts, tmp_path):
    """A grid with another harness's config (SPEC v5 §2b) takes runner parts: the merged
    cube holds both, in canonical order, and the imported cells stay."""
    _, items, whole, folder = whole_and_parts
    store = Store(tmp_path / "mixed.duckdb")
    store.create_grid("g")
    store.add_items("g", whole.load_items("g"))
    imported = "lm-eval:toy:acc+k0"
    store.write_cells("g", [CellRow("other-model", it.item_uid, imported, k % 2 == 0)
                            for k, it in enumerate(whole.load_items("g"))])
    summary = merge_parts(store, [folder], "g")
    assert summary["cells_added"] == 6 * len(CONFIGS)
    cube = store.load_cube("g")
    assert cube.configs[-1] == imported and list(cube.configs[:-1]) == [
        c for c in cube.configs if c != imported]
    assert cube.present[cube.models.index("other-model"), :, -1].all()
    with store.connect() as con:
        models, configs, bits, present = store.cube_from_cells(con, "g")
    assert tuple(configs) == cube.configs and (cube.bits == bits).all()


def test_extension_configs_travel_through_parts(tiny_folder, tmp_path):
    """A worker asked for letter-likelihood, modified and few-shot configs (issue 56): its
    parts merge into the same cells as a run into a store (the merger checks each cell's
    config against the configs its run was asked for), the examples a cell showed too."""
    items = write_items(tmp_path / "items.jsonl", 2)
    configs = "o0.letter,o1.paren.lik,o0.letter+nobos,cloze_qa+bos,o2.digit+k1"
    common = ["--model", str(tiny_folder), "--items", str(items), "--per-benchmark", "0",
              "--threads", "1", "--display", "none", "--grid", "g", "--configs", configs]
    whole = tmp_path / "whole.duckdb"  # the run into a store, in this process
    assert Run(RunSpec(models=[str(tiny_folder)], items=[str(items)], grid="g",
                       per_benchmark=None, threads=1, configs=configs.split(",")),
               Store(whole), display="none",
               events_path=str(tmp_path / "whole.jsonl")).execute() == "finished"
    folder = tmp_path / "parts"
    run_cli("run", *common, "--out-parts", str(folder), db=tmp_path / "never.duckdb",
            check=True, timeout=300)
    merged = tmp_path / "merged.duckdb"
    run_cli("merge", str(folder), "--grid", "g", db=merged, check=True)
    assert_same_cells(cells_of(Store(merged), "g"), cells_of(Store(whole), "g"))
    assert sorted(Store(merged).load_cube("g").configs) == sorted(configs.split(","))
    examples = {(c["item_uid"], c["config_id"]): c["examples"]
                for db in (whole, merged) for c in _all_cells(Store(db), "g")}
    assert all(len(v) == 1 for (uid, config), v in examples.items() if config == "o2.digit+k1")


def _all_cells(store, grid):
    with store.connect() as con:
        cur = con.execute("SELECT item_uid, config_id, examples FROM cells WHERE grid = ?",
                          [grid])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
