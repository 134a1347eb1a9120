"""import-log on real Every Eval Ever 0.3.0 conversions (tests/fixtures/logs/eee) of an
lm-eval and two Inspect logs: the harness that scored them is read from the aggregate,
lm-eval's row indices are never taken for item ids (content matching instead), epochs are
replicates, and the cells equal those of the logs imported directly."""

from __future__ import annotations

import json

from helpers import REPO, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs"
ITEMS = REPO / "sample_grids" / "starter_items.jsonl"


def _runs(db, *paths):
    out = run_cli("import-log", *map(str, paths), "--grid", "g", "--items", str(ITEMS),
                  "--model", "smollm2", "--json", db=db, check=True).stdout
    return {r["config"]: r for r in json.loads(out)["runs"]}


def _cells(db, config, columns="item_uid, correct, pred"):
    from fragility_tui.store.store import Store

    with Store(db).connect() as con:
        return con.execute(f"SELECT {columns} FROM cells WHERE config_id = ? "
                           "ORDER BY item_uid", [config]).fetchall()


def test_eee_conversions_land_on_the_harness_that_scored_them(tmp_path):
    db = tmp_path / "eee.duckdb"
    runs = _runs(db, LOGS / "eee" / "out_lmeval", LOGS / "eee" / "out_inspect",
                 LOGS / "eee" / "out_inspect_epochs2")
    assert sorted(runs) == ["inspect:fragility_mc:choice", "inspect:fragility_mc:choice+e1",
                            "inspect:fragility_mc:choice+e2", "lm-eval:fragility_starter:acc",
                            "lm-eval:fragility_starter:acc_norm"]
    for run in runs.values():
        assert run["unmatched"] == run["ambiguous"] == 0 and run["reproduces_log_accuracy"]
        assert run["axes"]["via"] == "every-eval-ever"
    assert runs["lm-eval:fragility_starter:acc_norm"]["log_accuracy"] == 0.475
    # the same cells as lm-eval's own log, imported directly (there its id carries +k0)
    direct = tmp_path / "direct.duckdb"
    _runs(direct, LOGS / "lmeval" / "mc")
    assert _cells(db, "lm-eval:fragility_starter:acc") == \
        _cells(direct, "lm-eval:fragility_starter:acc+k0")
    # EEE's rows show acc's pick under acc_norm too: only the correctness is acc_norm's
    assert _cells(db, "lm-eval:fragility_starter:acc_norm", "item_uid, correct") == \
        _cells(direct, "lm-eval:fragility_starter:acc_norm+k0", "item_uid, correct")
    assert {p for _, _, p in _cells(db, "lm-eval:fragility_starter:acc_norm")} == {None}


def test_row_indices_are_never_item_ids(tmp_path):
    """Items whose source ids are the row indices lm-eval's EEE rows carry: matching by
    that index would pair every row with the wrong item; content matching finds none."""
    src = [json.loads(line) for line in ITEMS.read_text().splitlines()][:40]
    decoys = tmp_path / "decoys.jsonl"
    decoys.write_text("".join(json.dumps({**it, "id": str(k), "question": f"decoy {k}?",
                                          "choices": ["w", "x", "y", "z"]}) + "\n"
                              for k, it in enumerate(src)))
    proc = run_cli("import-log", str(LOGS / "eee" / "out_lmeval"), "--grid", "g",
                   "--items", str(decoys), "--model", "m", db=tmp_path / "s.duckdb")
    assert proc.returncode == 2 and "0 matched, 40 unmatched" in proc.stderr
