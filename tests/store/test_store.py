"""The DuckDB store: schema, grids, items, cells (idempotent), cube loading, runs."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from fragility_tui.errors import InputError
from fragility_tui.items.item import Item
from fragility_tui.store.store import SCHEMA_VERSION, CellRow, Store


def _items(n=3):
    return [Item(f"bench/q{k}", "bench", "subj" if k % 2 else None, f"question {k}",
                 ("a", "b", "c", "d"), k % 4) for k in range(n)]


def test_fresh_store_has_schema_and_configs(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    assert store.schema_version() == SCHEMA_VERSION
    with store.connect() as con:
        configs = [r[0] for r in con.execute("SELECT config_id FROM configs ORDER BY position").fetchall()]
    assert len(configs) == 26 and configs[0] == "o0.letter" and configs[-1] == "cloze_bare"
    assert store.list_grids() == []


def test_cells_are_idempotent_and_cube_round_trips(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    store.add_items("g", _items())
    rows = [CellRow("m1", "bench/q0", "o0.letter", True, 0, "0123", "A."),
            CellRow("m1", "bench/q1", "cloze_qa", False, 2, None, None, [-1.0, -2.0, -0.5, -3.0]),
            CellRow("m2", "bench/q2", "o0.letter", True, 2)]
    assert store.write_cells("g", rows) == 3
    assert store.write_cells("g", rows + [CellRow("m2", "bench/q0", "o0.letter", False, 1)]) == 1
    assert store.count_cells("g") == 4
    cube = store.load_cube("g")
    assert cube.models == ("m1", "m2")
    assert cube.items == ("bench/q0", "bench/q1", "bench/q2")
    assert cube.configs == ("o0.letter", "cloze_qa")
    assert cube.present.sum() == 4
    assert cube.bits[0, 0, 0] and not cube.bits[1, 0, 0] and cube.bits[1, 2, 0]
    assert not cube.present[0, 2, 0]
    cells = store.item_cells("g", "bench/q1")
    assert cells[0]["scores"] == [-1.0, -2.0, -0.5, -3.0]
    info = store.grid_info("g")
    assert (info.models, info.items, info.configs, info.cells, info.complete) == (2, 3, 2, 4, False)


def test_add_items_keeps_order_and_skips_existing(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    assert store.add_items("g", _items(2)) == 2
    assert store.add_items("g", _items(4)) == 2
    assert [it.item_uid for it in store.load_items("g")] == [f"bench/q{k}" for k in range(4)]
    assert store.get_item("g", "bench/q3").gold == 3


def test_failed_transaction_leaves_store_unchanged(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    with pytest.raises(RuntimeError):
        with store.connect(write=True) as con:
            store.add_items("g", _items(), con=con)
            raise RuntimeError("boom")
    assert store.load_items("g") == []


def test_unknown_grid_is_input_error(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    with pytest.raises(InputError, match="no grid named 'nope'"):
        store.load_cube("nope")


def test_runs_round_trip(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    run_id = store.create_run({"grid": "g", "model": "m", "spec": {"items": ["x"]}})
    store.update_run(run_id, status="running", cells_done=5, provenance={"dtype": "fp32"})
    run = store.get_run(run_id)
    assert run.status == "running" and run.cells_done == 5
    assert run.spec == {"items": ["x"]} and run.provenance == {"dtype": "fp32"}
    assert [r.run_id for r in store.runs("g")] == [run_id]
    with pytest.raises(ValueError):
        store.update_run(run_id, nonsense=1)


def test_a_current_store_opens_without_the_schema_write(tmp_path, monkeypatch):
    """Opening a store at the current version reads its version and nothing else; one
    behind is migrated in a write transaction."""
    path = tmp_path / "s.duckdb"
    Store(path)
    writes = []
    original = Store._create_or_migrate
    monkeypatch.setattr(Store, "_create_or_migrate",
                        lambda self: (writes.append(1), original(self))[1])
    Store(path)
    assert writes == []
    con = duckdb.connect(str(path))  # what schema 6 wrote
    con.execute("ALTER TABLE cells DROP COLUMN margin")
    con.execute("ALTER TABLE cells DROP COLUMN near_tie")
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    assert Store(path).schema_version() == SCHEMA_VERSION and writes == [1]


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.duckdb"
    Store(path)
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(InputError, match="newer"):
        Store(path)


def test_a_schema_1_store_is_migrated_and_keeps_its_runs(tmp_path):
    path = tmp_path / "s.duckdb"
    run_id = Store(path).create_run({"grid": "g", "status": "running", "pid": 12345})
    con = duckdb.connect(str(path))  # make it what schema 1 wrote: no pid_started
    con.execute("ALTER TABLE runs DROP COLUMN pid_started")
    con.execute("ALTER TABLE models DROP COLUMN fingerprint")
    con.execute("ALTER TABLE cells DROP COLUMN prompt_sha")
    con.execute("ALTER TABLE cells DROP COLUMN margin")
    con.execute("ALTER TABLE cells DROP COLUMN near_tie")
    con.execute("DROP TABLE cube_cache")
    con.execute("DROP TABLE calibration_cache")
    con.execute("ALTER TABLE runs DROP COLUMN device")  # schema 6's
    con.execute("ALTER TABLE runs DROP COLUMN note")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 10
    run = store.get_run(run_id)
    assert run.pid == 12345 and run.pid_started is None
    store.update_run(run_id, pid_started="987")
    assert store.get_run(run_id).pid_started == "987"
    assert store.get_run(run_id).device is None  # 5 -> 6: device and note, NULL in old rows
    store.update_run(run_id, device="cuda:1", note="waiting for cuda:1, held by run r")
    assert store.get_run(run_id).device == "cuda:1"


def test_a_schema_6_store_gets_margin_and_near_tie_columns_in_place(tmp_path):
    """6 -> 7 adds cells.margin and cells.near_tie: old cells keep NULL (nothing is known
    about how close they were), new cells carry them through to the cells export."""
    path = tmp_path / "s.duckdb"
    store = Store(path)
    store.create_grid("g")
    store.write_cells("g", [CellRow("m", "toy/1", "o0.letter", True, 0)])
    con = duckdb.connect(str(path))  # what schema 6 wrote: neither column
    con.execute("ALTER TABLE cells DROP COLUMN margin")
    con.execute("ALTER TABLE cells DROP COLUMN near_tie")
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 10
    store.write_cells("g", [CellRow("m", "toy/1", "o0.paren", False, 1, margin=0.03,
                                    near_tie=True)])
    cells = {c["config_id"]: c for c in store.item_cells("g", "toy/1")}
    assert (cells["o0.letter"]["margin"], cells["o0.letter"]["near_tie"]) == (None, None)
    assert (cells["o0.paren"]["margin"], cells["o0.paren"]["near_tie"]) == (0.03, True)
    export = store.export_cells("g").to_pylist()
    assert [(r["config"], r["margin"], r["near_tie"]) for r in export] == [
        ("o0.letter", None, None), ("o0.paren", 0.03, True)]


def test_a_schema_2_store_gets_fingerprints_in_place_and_the_first_run_fills_them(tmp_path):
    """2 -> 3 adds models.fingerprint and cells.prompt_sha; old rows keep NULL there, the
    first run with a fingerprint fills it rather than being refused, later ones compare."""
    from fragility_tui.store.models import FingerprintMismatch

    path = tmp_path / "s.duckdb"
    store = Store(path)
    store.create_grid("g")
    store.upsert_model("g", "m", source="old", provenance={"dtype": "fp32"})
    store.write_cells("g", [CellRow("m", "toy/1", "o0.letter", True, 0)])
    con = duckdb.connect(str(path))  # what schema 2 wrote: neither column
    con.execute("ALTER TABLE models DROP COLUMN fingerprint")
    con.execute("ALTER TABLE cells DROP COLUMN prompt_sha")
    con.execute("ALTER TABLE cells DROP COLUMN margin")
    con.execute("ALTER TABLE cells DROP COLUMN near_tie")
    con.execute("DROP TABLE cube_cache")
    con.execute("DROP TABLE calibration_cache")
    con.execute("DROP TABLE grid_configs")
    con.execute("ALTER TABLE runs DROP COLUMN device")  # schema 6's
    con.execute("ALTER TABLE runs DROP COLUMN note")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION
    assert store.model_fingerprint("g", "m") == (True, None)
    assert store.item_cells("g", "toy/1")[0]["prompt_sha"] is None
    fp = {"dtype": "fp32", "max_new_tokens": 16}
    store.check_model("g", "m", fp)  # NULL: nothing to compare with
    kw = dict(source="new", revision=None, dtype="fp32", quantization=None, base_model=None,
              provenance={"x": 1})
    store.record_model("g", "m", fingerprint=fp, **kw)
    assert store.model_fingerprint("g", "m") == (True, fp)
    store.record_model("g", "m", fingerprint=fp, **kw)  # equal: kept as it is
    with pytest.raises(FingerprintMismatch, match=r"max_new_tokens 16 → 8.*--name NEW_NAME"):
        store.record_model("g", "m", fingerprint={**fp, "max_new_tokens": 8}, **kw)
    assert store.list_models("g")[0]["fingerprint"] == fp
    store.write_cells("g", [CellRow("m", "toy/2", "o0.letter", True, 0, prompt_sha="ab" * 32)])
    assert store.item_cells("g", "toy/2")[0]["prompt_sha"] == "ab" * 32


def test_a_schema_4_store_gets_the_calibration_cache(tmp_path):
    path = tmp_path / "s.duckdb"
    store = Store(path)
    store.create_grid("g")
    store.write_cells("g", [CellRow("m", "toy/1", "o0.letter", True, 0)])
    con = duckdb.connect(str(path))  # what schema 4 wrote: no calibration_cache
    con.execute("DROP TABLE calibration_cache")
    con.execute("ALTER TABLE runs DROP COLUMN device")  # schema 6's
    con.execute("ALTER TABLE runs DROP COLUMN note")
    con.execute("ALTER TABLE cells DROP COLUMN margin")  # schema 7's
    con.execute("ALTER TABLE cells DROP COLUMN near_tie")
    con.execute("DROP TABLE grid_configs")  # schema 8's
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 10
    assert store.calibration_results("g", "k") == {}
    store.save_calibration("g", "k", {("a", "b"): {"replicates": 3}})
    assert store.calibration_results("g", "k") == {("a", "b"): {"replicates": 3}}
    store.save_calibration("gone", "k", {("a", "b"): {"replicates": 3}})  # no such grid
    assert store.calibration_results("gone", "k") == {}


def test_a_legacy_model_row_is_compared_through_its_provenance(tmp_path):
    """A row from before fingerprints that a runner wrote still tells its settings in its
    provenance: a first run that agrees fills the fingerprint, one that does not is refused."""
    from fragility_tui.store.models import FingerprintMismatch

    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    old = {"weights_sha256": "a" * 64, "dtype": "fp32", "prompt_mode": "chat template",
           "chat_template_sha256": "c" * 64, "max_new_tokens": 16, "add_bos": False,
           "device": "cpu", "revision": None,
           "quantization": {"library": "optimum-quanto", "weights": "qint4"}}
    store.upsert_model("g", "m+int4", provenance=old)
    fp = {"weights_sha256": "a" * 64, "revision": None, "dtype": "fp32",
          "quantization": "optimum-quanto qint4 weights", "max_new_tokens": 16,
          "add_bos": False, "prompt_mode": "chat", "device_type": "cpu",
          "chat_template_sha256": "c" * 64, "parser_version": "p1"}
    with pytest.raises(FingerprintMismatch, match="prompt_mode chat → raw"):
        store.check_model("g", "m+int4", {**fp, "prompt_mode": "raw",
                                          "chat_template_sha256": None})
    kw = dict(source="s", revision=None, dtype="fp32", quantization=None, base_model="m",
              provenance={})
    with pytest.raises(FingerprintMismatch, match="dtype fp32 → bf16"):
        store.record_model("g", "m+int4", fingerprint={**fp, "dtype": "bf16"}, **kw)
    store.record_model("g", "m+int4", fingerprint=fp, **kw)
    assert store.model_fingerprint("g", "m+int4") == (True, fp)


def test_lock_is_waited_for(tmp_path):
    """A connection held by another process (simulated: another DuckDB instance in a
    subprocess) is waited for rather than failing at once."""
    import subprocess
    import sys
    import time

    path = tmp_path / "s.duckdb"
    Store(path)
    holder = subprocess.Popen([sys.executable, "-c",
                               f"import duckdb,time; c=duckdb.connect({str(path)!r}); "
                               "print('held', flush=True); time.sleep(1.5); c.close()"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    assert Store(path).list_grids() == []
    assert time.monotonic() - start > 0.5
    holder.wait(10)


def test_cube_select(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    store.add_items("g", _items(3) + [Item("other/x", "other", None, "q", ("a", "b", "c", "d"), 0)])
    rows = [CellRow(m, it, c, bool((i + j) % 2)) for i, m in enumerate(("m1", "m2"))
            for j, it in enumerate(("bench/q0", "bench/q1", "bench/q2", "other/x"))
            for c in ("o0.letter", "o1.letter", "cloze_qa")]
    store.write_cells("g", rows)
    cube = store.load_cube("g").select(configs=["cloze_qa", "o0.letter"], models=["m2"],
                                       benchmarks=["other"])
    assert cube.configs == ("o0.letter", "cloze_qa") and cube.models == ("m2",)
    assert cube.items == ("other/x",)
    assert np.array_equal(cube.bits[0, 0], [False, False])
    with pytest.raises(ValueError, match="unknown model"):
        cube.select(models=["zz"])


def _cube_equal(a, b) -> bool:
    return (a.models, a.items, a.configs) == (b.models, b.items, b.configs) and \
        np.array_equal(a.bits, b.bits) and np.array_equal(a.present, b.present)


def _cached_grids(store) -> list[str]:
    with store.connect() as con:
        return [r[0] for r in con.execute("SELECT grid FROM cube_cache ORDER BY grid").fetchall()]


def test_the_packed_cube_is_reused_and_never_stale(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    store.add_items("g", _items(3))
    store.write_cells("g", [CellRow("m1", "bench/q0", "o0.letter", True),
                            CellRow("m2", "bench/q1", "cloze_qa", False)])
    first = store.load_cube("g")
    assert _cached_grids(store) == ["g"]
    assert _cube_equal(store.load_cube("g"), first)  # read back from the packed copy

    store.write_cells("g", [CellRow("m3", "bench/q2", "o1.paren", True)])  # new cells
    assert _cached_grids(store) == []
    after_cells = store.load_cube("g")
    assert after_cells.models == ("m1", "m2", "m3") and after_cells.present.sum() == 3
    assert after_cells.configs == ("o0.letter", "o1.paren", "cloze_qa")

    store.write_cells("g", [CellRow("m3", "bench/q2", "o1.paren", False)])  # nothing new
    assert _cached_grids(store) == ["g"]
    store.add_items("g", _items(4))  # an item more: the cube grows a column
    assert _cached_grids(store) == []
    assert store.load_cube("g").bits.shape == (3, 4, 3)

    store.create_grid("h")
    store.add_items("h", _items(1))
    store.write_cells("h", [CellRow("m1", "bench/q0", "o0.letter", True)])
    store.load_cube("h")
    store.delete_grid("g")
    assert _cached_grids(store) == ["h"]


def test_a_cube_read_while_cells_change_is_not_cached(tmp_path, monkeypatch):
    store = Store(tmp_path / "s.duckdb")
    store.create_grid("g")
    store.add_items("g", _items(2))
    store.write_cells("g", [CellRow("m1", "bench/q0", "o0.letter", True)])
    read_cells = Store.cube_from_cells

    def read_then_a_cell_arrives(con, grid):
        cube = read_cells(con, grid)
        con.execute("INSERT INTO cells (grid, model, item_uid, config_id, correct) "
                    "VALUES ('g', 'm1', 'bench/q1', 'o0.letter', true)")
        return cube

    monkeypatch.setattr(Store, "cube_from_cells", staticmethod(read_then_a_cell_arrives))
    assert store.load_cube("g").present.sum() == 1
    monkeypatch.setattr(Store, "cube_from_cells", staticmethod(read_cells))
    assert _cached_grids(store) == []  # the copy would have missed the new cell
    assert store.load_cube("g").present.sum() == 2
