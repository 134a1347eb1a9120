"""A store written by the release before configs were data (schema 7, commit 86309db) opens
in this one with every grid, run and cell intact, migrated in one transaction."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from helpers import run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "schema7" / "store.duckdb.gz"


def test_a_schema_7_store_keeps_every_grid_run_and_cell(tmp_path):
    db = tmp_path / "store.duckdb"
    with gzip.open(FIXTURE) as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    grids = {g["name"]: g for g in json.loads(run_cli("grids", "--json", db=db,
                                                       check=True).stdout)}
    assert (grids["sim"]["cells"], grids["sim"]["configs"]) == (3120, 26)
    assert (grids["lm"]["cells"], grids["lm"]["configs"]) == (40, 1)
    from fragility_tui.store.schema import SCHEMA_VERSION
    from fragility_tui.store.store import Store

    store = Store(db)
    assert store.schema_version() == SCHEMA_VERSION == 10
    with store.connect() as con:  # 10: a +kN cell's examples; NULL in every older cell
        assert con.execute("SELECT count(*) FROM cells WHERE examples IS NOT NULL"
                           ).fetchall()[0][0] == 0
    cube = store.load_cube("sim")
    assert (int(cube.bits.sum()), int(cube.present.sum())) == (1873, 3120)
    assert cube.axes("o2.paren")["format"] == "paren" and cube.stated_axes is None
    runs = json.loads(run_cli("runs", "list", "--json", db=db, check=True).stdout)
    assert [r["model"] for r in runs] == ["smol"]
    report = json.loads(run_cli("report", "--grid", "lm", "--json", "--boot", "50",
                                "--random-draws", "10", db=db, check=True).stdout)
    assert report["grid"]["reference"] == "cloze_qa"
    # the migrated store takes an imported config beside the old ones
    out = run_cli("import-log", str(Path(__file__).parents[1] / "fixtures" / "logs" / "lmeval"
                                   / "mc"), "--grid", "lm", "--model", "smol", db=db,
                  check=True).stdout
    assert "reproduces the log's accuracy 0.450" in out
