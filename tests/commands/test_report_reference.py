"""Grids without the reference config o0.letter (e.g. imported from lm-eval's cloze
samples): `report` and `export --what report` fall back to the grid's first config in
canonical order, or take --reference; the report records the reference it used."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from helpers import run_cli


@pytest.fixture(scope="module")
def cloze_db(tmp_path_factory):
    """Four models x 30 items (two benchmarks) under cloze_qa and cloze_bare only."""
    folder = tmp_path_factory.mktemp("cloze")
    rng = np.random.default_rng(3)
    path = folder / "cloze.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "item", "benchmark", "config", "correct"])
        for m, skill in enumerate((0.8, 0.6, 0.5, 0.3)):
            for i in range(30):
                bench = "arc" if i < 15 else "mmlu"
                for config in ("cloze_qa", "cloze_bare"):
                    w.writerow([f"m{m}", f"{bench}/q{i}", bench, config,
                                str(bool(rng.random() < skill)).lower()])
    db = folder / "store.duckdb"
    run_cli("import", str(path), "--grid", "cloze", db=db, check=True)
    return db


def test_report_on_a_grid_without_o0_letter_uses_the_first_config(cloze_db):
    proc = run_cli("report", "--grid", "cloze", "--boot", "50", "--random-draws", "10",
                   db=cloze_db)
    assert proc.returncode == 0, proc.stderr
    assert "reference cloze_qa" in proc.stdout
    assert ("reference cloze_qa stands in for SPEC's o0.letter: every figure is measured "
            "against it") in proc.stdout  # whole: the note is not cut to fit
    r = json.loads(run_cli("report", "--grid", "cloze", "--json", "--boot", "50",
                           "--random-draws", "10", db=cloze_db, check=True).stdout)
    assert r["grid"]["reference"] == r["settings"]["reference"] == "cloze_qa"
    assert r["settings"]["reference_is_spec"] is False
    assert len(r["pairs"]) == 3 and {d["config"] for d in r["decisions"]} == {"cloze_qa"}
    # a cloze reference has no order or format axis; the two cloze stems are its stem
    # axis (SPEC v5 §7), reported after the four always listed
    assert r["axes"]["mean"]["order"] is None and r["axes"]["mean"]["format"] is None
    assert list(r["axes"]["mean"]) == ["order", "format", "scoring", "all", "stem"]
    assert r["axes"]["mean"]["stem"] is not None


def test_reference_flag_picks_another_config(cloze_db):
    r = json.loads(run_cli("report", "--grid", "cloze", "--reference", "cloze_bare", "--json",
                           "--boot", "50", "--random-draws", "10", db=cloze_db,
                           check=True).stdout)
    assert r["grid"]["reference"] == "cloze_bare"
    assert {d["config"] for d in r["decisions"]} == {"cloze_bare"}
    assert [b["reference"] for b in r["bands"]] == sorted(
        (b["reference"] for b in r["bands"]), reverse=True)


@pytest.mark.parametrize("args, message", [
    (["--reference", "o0.letter"], "the grid has no cells for o0.letter"),
    (["--reference", "o9.nope"], "unknown config 'o9.nope'"),
    (["--reference", "cloze_bare", "--configs", "cloze_qa"],
     "the reference config cloze_bare must be in view"),
])
def test_bad_reference_is_a_usage_error(cloze_db, args, message):
    proc = run_cli("report", "--grid", "cloze", *args, db=cloze_db)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_export_report_takes_the_reference(cloze_db, tmp_path):
    out = tmp_path / "r.json"
    run_cli("export", "--grid", "cloze", "--what", "report", "--format", "json", "--out",
            str(out), db=cloze_db, check=True)
    assert json.loads(out.read_text())["grid"]["reference"] == "cloze_qa"
    run_cli("export", "--grid", "cloze", "--what", "report", "--format", "json",
            "--reference", "cloze_bare", "--out", str(out), db=cloze_db, check=True)
    assert json.loads(out.read_text())["settings"]["reference"] == "cloze_bare"
    proc = run_cli("export", "--grid", "cloze", "--what", "cells", "--reference", "cloze_qa",
                   "--out", str(tmp_path / "c.csv"), db=cloze_db)
    assert proc.returncode == 2 and "--reference applies to --what report only" in proc.stderr
