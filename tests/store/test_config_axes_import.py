"""Long-format import of any config id (SPEC v5 §2b): axes from axis_<name> columns or a
--config-axes sidecar, stored with the grid, used by the report's axis ablation, exported."""

from __future__ import annotations

import csv
import json

import pytest

from helpers import run_cli


def _write(path, rows, header=("model", "item", "config", "correct", "axis_harness",
                               "axis_scoring")):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def _two_harness_rows():
    rows = []
    for m, skill in (("a", 7), ("b", 5)):
        for i in range(30):
            rows.append([m, f"arc/q{i}", "ours:arc:gen", str(int(i % 10 < skill)), "ours",
                         "generate"])
            rows.append([m, f"arc/q{i}", "theirs:arc:gen", str(int(i % 10 < skill - 1)),
                         "theirs", "generate"])
            rows.append([m, f"arc/q{i}", "theirs:arc:lik", str(int(i % 10 < 3)), "theirs",
                         "likelihood"])
    return rows


def test_free_form_configs_with_axis_columns_report_a_harness_axis(tmp_path):
    path = _write(tmp_path / "g.csv", _two_harness_rows())
    db = tmp_path / "s.duckdb"
    out = run_cli("import", str(path), "--grid", "g", db=db, check=True).stdout
    assert "3 configs" in out
    r = json.loads(run_cli("report", "--grid", "g", "--json", "--boot", "50",
                           "--random-draws", "10", db=db, check=True).stdout)
    assert r["grid"]["reference"] == "ours:arc:gen"  # first in canonical order
    # harness neighbourhood: ours:arc:gen + theirs:arc:gen (same scoring); theirs:arc:lik
    # differs in scoring too, so it is the scoring axis's only with another harness: not
    # in either neighbourhood
    mean = r["axes"]["mean"]
    assert list(mean) == ["order", "format", "scoring", "all", "harness"]
    assert mean["harness"] == pytest.approx((6 / 7 + 4 / 5) / 2)
    assert mean["scoring"] is None
    cells = tmp_path / "cells.csv"
    run_cli("export", "--grid", "g", "--what", "cells", "--out", str(cells), db=db, check=True)
    with open(cells) as fh:
        exported = list(csv.DictReader(fh))
    assert {r["config"] for r in exported} == {"ours:arc:gen", "theirs:arc:gen", "theirs:arc:lik"}


def test_a_sidecar_states_axes_and_must_agree_with_the_columns(tmp_path):
    rows = [[m, f"arc/q{i}", cfg, str(int((i + len(cfg)) % 3 == 0))]
            for m in ("a", "b") for i in range(10) for cfg in ("mine-1", "mine-2")]
    path = _write(tmp_path / "g.csv", rows, header=("model", "item", "config", "correct"))
    sidecar = tmp_path / "axes.json"
    sidecar.write_text(json.dumps({"mine-1": {"prompt": "p1", "shots": 0},
                                   "mine-2": {"prompt": "p2", "shots": 0}}))
    db = tmp_path / "s.duckdb"
    run_cli("import", str(path), "--grid", "g", "--config-axes", str(sidecar), db=db,
            check=True)
    r = json.loads(run_cli("report", "--grid", "g", "--json", "--boot", "50",
                           "--random-draws", "10", db=db, check=True).stdout)
    assert "prompt" in r["axes"]["mean"]
    # a sidecar naming a config the file lacks, or disagreeing with a column, is refused
    sidecar.write_text(json.dumps({"mine-3": {"prompt": "p3"}}))
    proc = run_cli("import", str(path), "--grid", "g2", "--config-axes", str(sidecar), db=db)
    assert proc.returncode == 2 and "config 'mine-3' has axes but no cells" in proc.stderr
    sidecar.write_text(json.dumps({"mine-1": ["not", "an", "object"]}))
    proc = run_cli("import", str(path), "--grid", "g2", "--config-axes", str(sidecar), db=db)
    assert proc.returncode == 2 and "must be a JSON object of axis: level" in proc.stderr
    assert "axes.json" in proc.stderr
    grids = json.loads(run_cli("grids", "--json", db=db, check=True).stdout)
    assert [g["name"] for g in grids] == ["g"]  # nothing half-imported


def test_an_axis_column_must_hold_one_level_per_config(tmp_path):
    rows = _two_harness_rows()
    rows[5][4] = "other"  # a theirs:arc:lik row that says another harness
    path = _write(tmp_path / "g.csv", rows)
    proc = run_cli("import", str(path), "--grid", "g", db=tmp_path / "s.duckdb")
    assert proc.returncode == 2
    assert ("row 6, column 'axis_harness': config 'theirs:arc:lik' has another level of "
            "axis_harness") in proc.stderr
