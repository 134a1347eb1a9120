"""Issue 57 item 1: what the store hands back reaches the terminal only through the one
sanitiser, one unreadable run row does not break every run's listing, and NaN / Infinity
never make --json output invalid JSON."""

from __future__ import annotations

import json
import re

from helpers import run_cli

HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202eevil\x00\x9b31m"
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _store(tmp_path):
    from fragility_tui.store.connection import duckdb
    from fragility_tui.store.store import Store

    db = tmp_path / "s.duckdb"
    store = Store(db)
    store.create_grid("g")
    good = store.create_run({"grid": "g", "model": "m" + HOSTILE, "status": "finished" + HOSTILE,
                             "device": "cpu" + HOSTILE,
                             "provenance": {"device": HOSTILE, "python": HOSTILE,
                                            "configs": ["o0.letter" + HOSTILE],
                                            "libraries": {"torch": HOSTILE}},
                             "seconds": float("nan"), "tokens": 5})
    bad = store.create_run({"grid": "g", "model": "m2", "status": "finished"})
    deep = store.create_run({"grid": "g", "model": "m3", "status": "finished"})
    con = duckdb.connect(str(db))
    con.execute("UPDATE runs SET provenance = ? WHERE run_id = ?", ['{"x": ' + "9" * 5000 + "}", bad])
    con.execute("UPDATE runs SET spec = ? WHERE run_id = ?", ["[" * 200_000 + "]" * 200_000, deep])
    con.close()
    return db, good, bad, deep


def test_runs_list_and_show_print_no_control_character(tmp_path):
    db, good, bad, deep = _store(tmp_path)
    listing = run_cli("runs", "list", db=db, check=True).stdout
    assert not CONTROLS.search(listing), repr(listing)
    assert good in listing and bad in listing and deep in listing
    card = run_cli("runs", "show", good, db=db, check=True).stdout
    assert not CONTROLS.search(card), repr(card)
    for run_id in (bad, deep):
        card = run_cli("runs", "show", run_id, db=db, check=True).stdout
        assert "unreadable record" in card and not CONTROLS.search(card)


def test_json_outputs_stay_json(tmp_path):
    db, good, bad, _ = _store(tmp_path)
    rows = json.loads(run_cli("runs", "list", "--json", db=db, check=True).stdout)
    by_id = {r["run_id"]: r for r in rows}
    assert by_id[good]["seconds"] is None
    assert by_id[bad]["provenance"] == {} and "provenance" in by_id[bad]["unreadable"]
    shown = json.loads(run_cli("runs", "show", good, "--json", db=db, check=True).stdout)
    assert shown["seconds"] is None


def test_export_provenance_of_a_grid_with_bad_rows_is_json(tmp_path):
    db, good, bad, _ = _store(tmp_path)
    out = tmp_path / "prov.json"
    run_cli("export", "--grid", "g", "--what", "provenance", "--format", "json", "--out",
            str(out), db=db, check=True)
    doc = json.loads(out.read_text())
    assert len(doc["runs"]) == 3
