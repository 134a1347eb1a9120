"""A grid holding our runner's extension configs (issue 56; SPEC v5 §2, §7): `report` and
its JSON show the bos, template and shots axes beside order, format and scoring, each
neighbourhood the reference plus the configs that differ from it on that axis alone."""

from __future__ import annotations

import csv
import json

import numpy as np

from helpers import run_cli

CONFIGS = ("o0.letter", "o0.paren", "o1.letter", "cloze_qa", "o0.letter.lik",
           "o0.letter+nobos", "o0.letter+raw", "o0.letter+chat")


def test_report_shows_the_extension_axes(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "ext.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "item", "benchmark", "config", "correct"])
        for m, skill in enumerate((0.8, 0.5, 0.3)):
            for i in range(24):
                for config in CONFIGS:
                    w.writerow([f"m{m}", f"arc/q{i}", "arc", config,
                                str(bool(rng.random() < skill)).lower()])
    db = tmp_path / "s.duckdb"
    run_cli("import", str(path), "--grid", "ext", db=db, check=True)
    r = json.loads(run_cli("report", "--grid", "ext", "--json", "--boot", "50",
                           "--random-draws", "10", db=db, check=True).stdout)
    assert list(r["axes"]["mean"]) == ["order", "format", "scoring", "all", "bos",
                                       "template"]
    assert all(r["axes"]["mean"][axis] is not None for axis in ("bos", "template",
                                                               "scoring"))
    text = run_cli("report", "--grid", "ext", "--boot", "50", "--random-draws", "10",
                   db=db, check=True).stdout
    header = next(line for line in text.splitlines() if line.startswith("model") and
                  "order" in line and "bos" in line)
    assert header.split()[-2:] == ["bos", "template"]
