"""Three processes share one store: a run writing cells continuously, a reader, an import.
All finish with no lock error and no lost or duplicated cell (docs/architecture.md, "The
store and its concurrency design")."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from helpers import REPO, run_cli

WRITER = textwrap.dedent("""
    import sys
    from fragility_tui.items.item import Item
    from fragility_tui.store.store import CellRow, Store
    from fragility_tui.harness.configs import CONFIG_IDS
    store = Store(sys.argv[1])
    store.create_grid("live")
    items = [Item(f"b/q{k}", "b", None, "q", ("a", "b", "c", "d"), 0) for k in range(60)]
    store.add_items("live", items)
    batch = []
    for k, item in enumerate(items):
        for j, cfg in enumerate(CONFIG_IDS):
            batch.append(CellRow("writer-model", item.item_uid, cfg, (k + j) % 3 == 0))
            if len(batch) == 13:
                store.write_cells("live", batch)
                # a crash-and-resume rewrites part of the last batch: must not duplicate
                store.write_cells("live", batch[-3:])
                batch = []
    store.write_cells("live", batch)
    print("writer done")
""")

READER = textwrap.dedent("""
    import sys, time
    from fragility_tui.store.store import Store
    store = Store(sys.argv[1])
    reads = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        names = [g.name for g in store.list_grids()]
        if "live" in names:
            cube = store.load_cube("live")
            assert cube.present.sum() <= 60 * 26
        reads += 1
        if reads >= 40 and {"live", "imported"} <= set(names):
            break
    print("reader done", reads)
""")


def test_writer_reader_and_import_share_the_store(tmp_path):
    db = tmp_path / "shared.duckdb"
    src = tmp_path / "src.duckdb"
    grid_file = tmp_path / "grid.parquet"
    run_cli("simulate", "--models", "4", "--items", "300", "--grid", "g", db=src, check=True)
    run_cli("export", "--grid", "g", "--format", "parquet", "--out", str(grid_file), db=src, check=True)
    run_cli("grids", db=db, check=True)  # create the schema first

    env_cmd = [sys.executable, "-c"]
    writer = subprocess.Popen(env_cmd + [WRITER, str(db)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    reader = subprocess.Popen(env_cmd + [READER, str(db)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    importer = run_cli("import", str(grid_file), "--grid", "imported", db=db, timeout=180)
    w_out, w_err = writer.communicate(timeout=180)
    r_out, r_err = reader.communicate(timeout=180)

    assert importer.returncode == 0, importer.stderr
    assert writer.returncode == 0, w_err
    assert reader.returncode == 0, r_err
    assert "writer done" in w_out and "reader done" in r_out

    from fragility_tui.store.store import Store

    store = Store(db)
    with store.connect() as con:
        dupes = con.execute("SELECT count(*) FROM (SELECT grid, model, item_uid, config_id "
                            "FROM cells GROUP BY ALL HAVING count(*) > 1)").fetchall()[0][0]
    assert dupes == 0
    assert store.count_cells("live") == 60 * 26
    assert store.count_cells("imported") == 4 * 300 * 26
    live = store.load_cube("live")
    assert live.present.all()
    expected = [[(k + j) % 3 == 0 for j in range(26)] for k in range(60)]
    assert (live.bits[0] == expected).all()
