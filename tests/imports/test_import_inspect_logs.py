"""import-log on real Inspect AI 0.3.285 logs (tests/fixtures/logs/inspect, the commands in
its README): .eval zips (zstd members) and their JSON form give the same cells; shuffled
choices are matched by option text with the order they showed recorded; epochs are
replicate configs; a damaged .eval is one clear error and nothing is written."""

from __future__ import annotations

import json
import zipfile

import pytest

from helpers import REPO, import_logs as _import, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs" / "inspect"
ITEMS = REPO / "sample_grids" / "starter_items.jsonl"


def _cells(db, grid="g"):
    from fragility_tui.store.store import Store

    with Store(db).connect() as con:
        return con.execute("SELECT config_id, item_uid, correct, permutation, raw_output, "
                           "prompt FROM cells WHERE grid = ? ORDER BY ALL", [grid]).fetchall()


def test_eval_and_json_logs_give_the_same_cells(tmp_path):
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    runs = _import(a, LOGS / "logs" / "plain")
    _import(b, LOGS / "json" / "plain")
    assert _cells(a) == _cells(b) and len(_cells(a)) == 40
    (run,) = runs
    assert run["config"] == "inspect:fragility_mc:choice" and run["matched"] == 40
    assert run["log_accuracy"] == 0.0 and run["reproduces_log_accuracy"]
    assert run["axes"]["scoring"] == "generate" and run["axes"]["solver"] == "multiple_choice"
    prompts = {p for *_, p in _cells(a)}
    assert all(p and p.startswith("user: Answer the following multiple choice question")
               for p in prompts)


def test_shuffled_choices_match_by_text_and_record_the_order_shown(tmp_path):
    db = tmp_path / "s.duckdb"
    (run,) = _import(db, LOGS / "logs" / "shuffle")
    assert run["config"] == "inspect:fragility_mc[shuffle_choices=0]:choice"
    assert run["axes"]["shuffle"] == "on" and run["matched"] == 40
    perms = {uid: perm for _, uid, _, perm, _, _ in _cells(db)}
    # acad_001's native choices 8, 15, 20, 12 were shown as 20, 8, 15, 12
    assert perms["starter_academic/acad_001"] == "2013"
    assert sum(p is not None for p in perms.values()) > 20


def test_epochs_are_replicate_configs_not_averaged(tmp_path):
    runs = _import(tmp_path / "s.duckdb", LOGS / "logs" / "epochs2")
    assert [(r["config"], r["cells"]) for r in runs] == [
        ("inspect:fragility_mc:choice+e1", 20), ("inspect:fragility_mc:choice+e2", 20)]
    assert all(r["axes"]["epoch"] if "epoch" in r["axes"] else True for r in runs)


def test_a_truncated_eval_is_one_error_and_nothing_is_written(tmp_path):
    src = next((LOGS / "logs" / "plain").glob("*.eval"))
    cut = tmp_path / "cut.eval"
    cut.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    db = tmp_path / "s.duckdb"
    proc = _import(db, cut, check=False)
    assert proc.returncode == 2 and "cut.eval" in proc.stderr
    assert "truncated" in proc.stderr or "damaged" in proc.stderr
    # a zip without its header
    bare = tmp_path / "bare.eval"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bare, "w") as zout:
        for info in zin.infolist():
            if info.filename != "header.json":
                zout.writestr(info.filename, b"{}")
    proc = _import(db, bare, check=False)
    assert proc.returncode == 2 and "no header.json" in proc.stderr
    assert not db.exists() or _grid_names(db) == []


def _grid_names(db):
    return [g["name"] for g in json.loads(run_cli("grids", "--json", db=db,
                                                   check=True).stdout)]


@pytest.mark.anyio
async def test_the_axes_pane_shows_the_harness_axis_of_two_harnesses(tmp_path):
    from fragility_tui.tui.app import FragilityApp
    from fragility_tui.tui.widgets import ReportTable

    from tests.tui.conftest import open_pane, screen_text, wait_ready

    db = tmp_path / "s.duckdb"
    run_cli("import-log", str(LOGS / "logs" / "plain"),
            str(REPO / "tests" / "fixtures" / "logs" / "lmeval" / "gen"), "--grid", "two",
            "--model", "smollm2", "--items", str(ITEMS), db=db, check=True)
    app = FragilityApp(str(db))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "5")
        table = app.pane("axes").query_one(ReportTable)
        assert table.header() == ["model", "order", "format", "scoring", "all", "harness"]
        assert "harness" in screen_text(app)
