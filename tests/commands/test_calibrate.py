"""`fragility-tui calibrate` as a user runs it (subprocess), and its cache in the store: one
result per (grid content, reference, replicates, seed, bootstrap), never a stale one."""

from __future__ import annotations

import csv
import json

import duckdb
import numpy as np
import pytest

from helpers import run_cli

from fragility_tui.analysis import calibration
from fragility_tui.commands import calibrate as command
from fragility_tui.services.reports import grid_calibration
from fragility_tui.store.store import Store
from fragility_tui.store.schema import CellRow

FAST = ("--replicates", "12", "--boot", "30")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A synthetic grid (4 models x 40 items x 26 configs) and a cloze-only one."""
    folder = tmp_path_factory.mktemp("calib")
    db = folder / "store.duckdb"
    run_cli("simulate", "--models", "4", "--items", "40", "--seed", "3", "--grid", "syn",
            db=db, check=True)
    rng = np.random.default_rng(3)
    path = folder / "cloze.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "item", "benchmark", "config", "correct"])
        for m, skill in enumerate((0.8, 0.6, 0.4)):
            for i in range(20):
                for config in ("cloze_qa", "cloze_bare"):
                    w.writerow([f"m{m}", f"arc/q{i}", "arc", config,
                                str(bool(rng.random() < skill)).lower()])
    run_cli("import", str(path), "--grid", "cloze", db=db, check=True)
    return db


@pytest.fixture
def db(template, tmp_path):
    path = tmp_path / "store.duckdb"
    path.write_bytes(template.read_bytes())
    return path


def test_text_output_states_the_replicates_and_every_verdict_and_label(db):
    proc = run_cli("calibrate", "--grid", "syn", *FAST, db=db)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Verdict calibration of grid syn (reference o0.letter)" in out
    assert "12 replicates per scenario and pair, 3 adjacent pairs" in out
    assert "from 30 bootstrap resamples" in out
    for word in ("repro", "exch.", "harness", "at m", "stable@m", "manufactured",
                 "underpowered", "reproducibility at the observed gap", "false alarms",
                 "power at the margin", "95% Wilson interval", "Family of adjacent pairs",
                 "reproducibility_at_observed_gap", "false_alarms_exchangeable",
                 "false_alarms_harness_kept", "power_at_margin"):
        assert word in out, word
    assert "cache: 0 pairs reused, 3 computed" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    again = run_cli("calibrate", "--grid", "syn", *FAST, db=db, check=True).stdout
    assert "cache: 3 pairs reused, 0 computed" in again
    strip = lambda text: [x for x in text.splitlines() if not x.startswith("cache:")]  # noqa: E731
    assert strip(again) == strip(out)


SCENARIO_KEYS = ("reproducibility_at_observed_gap", "false_alarms_exchangeable",
                 "false_alarms_harness_kept", "power_at_margin")


def assert_rate(r, n):
    """A rate as the JSON gives every one: count of n, the rate, its 95% interval."""
    assert set(r) == {"count", "n", "rate", "ci_low", "ci_high"}
    assert r["n"] == n and 0 <= r["count"] <= n and r["rate"] == pytest.approx(r["count"] / n)
    assert 0.0 <= r["ci_low"] <= r["rate"] <= r["ci_high"] <= 1.0 and r["ci_low"] < r["ci_high"]


def test_json_output_names_scenarios_by_what_they_measure_with_intervals(db):
    r = json.loads(run_cli("calibrate", "--grid", "syn", "--json", *FAST, db=db,
                           check=True).stdout)
    assert r["grid"] == "syn"
    assert r["settings"] == {"method_version": calibration.METHOD_VERSION,
                             "reference": "o0.letter", "replicates": 12, "seed": 0,
                             "n_boot": 30, "margin_points": 2.0, "interval": "wilson_95"}
    assert set(r["scenarios"]) == {*SCENARIO_KEYS, "family_largest_gap"}
    assert all(len(text) > 20 for text in r["scenarios"].values())  # says what it measures
    report = json.loads(run_cli("report", "--grid", "syn", "--json", "--boot", "100",
                                "--random-draws", "5", db=db, check=True).stdout)
    adjacent = [(p["a"], p["b"]) for p in report["pairs"]]
    assert [(p["a"], p["b"]) for p in r["pairs"]] == adjacent
    for p, rp in zip(r["pairs"], report["pairs"]):
        assert p["replicates"] == 12 and p["adjacent"] is True
        assert p["observed"]["verdict"] == rp["verdict"] and p["observed"]["gap"] == rp["gap"]
        assert p["observed"]["manufactured"] == rp["manufactured"]
        assert "real" not in p and "none" not in p  # the old names said the wrong thing
        for scenario in SCENARIO_KEYS:
            tally = p[scenario]
            assert sum(v["count"] for v in tally["verdicts"].values()) == 12
            for v in tally["verdicts"].values():
                assert_rate(v, 12)
            assert_rate(tally["manufactured"], 12)
            for target in ("observed", "balanced"):
                assert sum(x["count"] for x in tally["labels"][target].values()) == 12
                for x in tally["labels"][target].values():
                    assert_rate(x, 12)
            assert tally["shortfall_items"] >= 0
        assert p["false_alarms_exchangeable"]["true_gap_points"] == 0.0
        expected_null = 0.0 if p["false_alarms_harness_kept"]["shortfall_items"] == 0 else None
        if expected_null is not None:
            assert p["false_alarms_harness_kept"]["true_gap_points"] == pytest.approx(0.0)
        assert_rate(p["family_exceed"], 12)
    assert r["totals"]["replicates"] == 36
    assert_rate(r["totals"]["power_at_margin"]["labels"]["observed"]["stable"], 36)
    family = r["family_largest_gap"]
    assert family["pairs"] == 3 and family["replicates"] == 12
    assert_rate(family["at_least_observed"], 12)
    assert family["observed_largest_gap_points"] == pytest.approx(
        max(abs(p["observed"]["gap"]) for p in r["pairs"]) * 100 / 40)
    assert r["cache"]["pairs_computed"] == 3


def test_a_named_pair_and_the_reference_stand_in(db):
    r = json.loads(run_cli("calibrate", "--grid", "syn", "--json", "--pair",
                           "synthetic-model-01,synthetic-model-04", *FAST, db=db,
                           check=True).stdout)
    assert [(p["a"], p["b"], p["adjacent"]) for p in r["pairs"]] == [
        ("synthetic-model-01", "synthetic-model-04", False)]
    cloze = json.loads(run_cli("calibrate", "--grid", "cloze", "--json", *FAST, db=db,
                               check=True).stdout)
    assert cloze["settings"]["reference"] == "cloze_qa" and len(cloze["pairs"]) == 2
    text = run_cli("calibrate", "--grid", "cloze", *FAST, db=db, check=True).stdout
    assert "reference cloze_qa stands in for SPEC's o0.letter" in text
    bare = json.loads(run_cli("calibrate", "--grid", "cloze", "--reference", "cloze_bare",
                              "--json", *FAST, db=db, check=True).stdout)
    assert bare["settings"]["reference"] == "cloze_bare"
    assert bare["cache"]["key"] != cloze["cache"]["key"]


@pytest.mark.parametrize("args, field", [
    (("--grid", "nope"), "no grid named 'nope'"),
    (("--grid", "syn", "--replicates", "0"), "--replicates"),
    (("--grid", "syn", "--boot", "0"), "--boot"),
    (("--grid", "syn", "--reference", "o9.letter"), "--reference"),
    (("--grid", "cloze", "--reference", "o0.letter"), "the grid has no cells for o0.letter"),
    (("--grid", "syn", "--pair", "synthetic-model-01,ghost"), "ghost"),
])
def test_bad_input_exits_2_with_a_clear_error(db, args, field):
    proc = run_cli("calibrate", *args, db=db)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error:") and field in proc.stderr
    assert proc.stdout == ""


def test_defaults_match_the_analysis_module():
    assert (command.REPLICATES, command.N_BOOT) == (calibration.REPLICATES, calibration.N_BOOT)


def cached_rows(path, grid):
    con = duckdb.connect(str(path))
    try:
        return con.execute("SELECT count(*) FROM calibration_cache WHERE grid = ?",
                           [grid]).fetchall()[0][0]
    finally:
        con.close()


def test_new_cells_drop_the_cached_calibration_in_their_transaction(db):
    store = Store(db)
    first = grid_calibration(store, "syn", replicates=6, n_boot=20)
    assert cached_rows(db, "syn") == 3 and first["cache"]["pairs_computed"] == 3
    item = store.load_items("syn")[0].item_uid
    store.write_cells("syn", [CellRow("newcomer", item, "o0.letter", True, 0)])
    assert cached_rows(db, "syn") == 0
    second = grid_calibration(store, "syn", replicates=6, n_boot=20)
    assert second["cache"]["key"] != first["cache"]["key"]
    assert second["cache"]["pairs_reused"] == 0
    store.delete_grid("syn")
    assert cached_rows(db, "syn") == 0


def test_a_grid_changed_behind_the_cache_gets_a_fresh_result(db):
    """Even a change that skips the invalidation (raw SQL) is never served the old result:
    the key is a digest of the content calibrated."""
    store = Store(db)
    first = grid_calibration(store, "syn", replicates=6, n_boot=20)
    con = duckdb.connect(str(db))
    con.execute("UPDATE cells SET correct = NOT correct WHERE grid = 'syn' AND "
                "config_id = 'o0.letter' AND model = 'synthetic-model-01'")
    con.execute("DELETE FROM cube_cache WHERE grid = 'syn'")  # the packed cube, rebuilt
    con.close()
    assert cached_rows(db, "syn") == 3  # the old rows are still there...
    second = grid_calibration(store, "syn", replicates=6, n_boot=20)
    assert second["cache"]["key"] != first["cache"]["key"]  # ...and are not used
    assert second["cache"]["pairs_computed"] == len(second["pairs"])
    third = grid_calibration(store, "syn", replicates=6, n_boot=20)
    assert third["cache"]["pairs_reused"] == len(third["pairs"])
    assert third["pairs"] == second["pairs"]


def test_each_setting_has_its_own_cached_result(db):
    store = Store(db)
    base = grid_calibration(store, "syn", replicates=6, n_boot=20)
    for change in ({"replicates": 7}, {"seed": 1}, {"n_boot": 21}):
        other = grid_calibration(store, "syn", **{"replicates": 6, "n_boot": 20, **change})
        assert other["cache"]["pairs_computed"] == 3, change
        assert other["cache"]["key"] != base["cache"]["key"]
    assert grid_calibration(store, "syn", replicates=6, n_boot=20)["cache"]["pairs_reused"] == 3


def test_text_states_each_truths_gaps_marks_only_false_alarms_and_names_what_it_pools(db):
    """Issue 43 item 4: not '(false alarms)' beside every null rate, not 'a true gap of 2
    points' where the truths' gaps differ, no pooled rate without its truths."""
    result = json.loads(run_cli("calibrate", "--grid", "syn", "--json", *FAST, db=db,
                                check=True).stdout)
    secs = {s.title.split(" (")[0]: s for s in command.sections(result)}
    gaps = secs["True gaps of each scenario's truth"]
    for row, p in zip(gaps.rows, result["pairs"]):
        assert row[:2] == [p["a"], p["b"]]
        for cell, scenario in zip(row[2:6], SCENARIO_KEYS):
            g = p[scenario]["true_gap_points"]
            assert cell.rstrip("†") == ("0" if abs(g) < 0.05 else f"{g:+.1f}")
            assert cell.endswith("†") == bool(p[scenario]["shortfall_items"])
    for target in ("observed", "balanced"):
        table = secs[f"Decision labels at o0.letter, {target} target"]
        for row, p in zip(table.rows, result["pairs"]):
            label = p["observed"]["labels"][target]
            for cell, scenario in zip(row[3:7], SCENARIO_KEYS):
                alarm = calibration.is_false_alarm(p[scenario], scenario, label, target)
                assert cell.endswith("*") == alarm, (scenario, label, cell)
    verdicts = secs["Gap-split verdicts"]
    assert not any(str(c).endswith("*") for row in verdicts.rows for c in row)
    pooled = next(s for s in command.sections(result) if s.title.startswith("Pooled over"))
    assert pooled.title.startswith("Pooled over the 3 pairs' truths")
    assert "true gaps" in pooled.headers and "false alarms" in pooled.headers
    text = run_cli("calibrate", "--grid", "syn", *FAST, db=db, check=True).stdout
    assert "true gap of 2 points" not in text and "(false alarms)" not in text
