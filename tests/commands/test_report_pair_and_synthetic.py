"""Issue 44: `report --pair A,B` shows both models' accuracies and the items only one of
them gets right, at the reference and under every config in view (text, Markdown, JSON);
a synthetic grid is labelled SYNTHETIC in the report's header and its JSON `grid`."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from helpers import run_cli

FAST = ("--boot", "50", "--random-draws", "5")
PAIR = "synthetic-model-01,synthetic-model-04"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    path = folder / "s.duckdb"
    run_cli("simulate", "--models", "4", "--items", "40", "--seed", "3", "--grid", "syn",
            db=path, check=True)
    rng = np.random.default_rng(0)
    cells = folder / "real.csv"
    with open(cells, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "item", "benchmark", "config", "correct"])
        for m in ("m1", "m2"):
            for i in range(12):
                for config in ("o0.letter", "cloze_qa"):
                    if (m, i, config) == ("m2", 0, "cloze_qa"):
                        continue  # a missing cell: not paired
                    w.writerow([m, f"arc/q{i}", "arc", config,
                                str(bool(rng.random() < 0.5)).lower()])
    run_cli("import", str(cells), "--grid", "real", db=path, check=True)
    return path, cells


def expected(cells_path):
    """{config: (acc m1, acc m2, paired, only m1, only m2)} from the CSV itself."""
    got = {}
    with open(cells_path) as fh:
        for row in csv.DictReader(fh):
            got[(row["model"], row["item"], row["config"])] = row["correct"] == "true"
    out = {}
    for config in ("o0.letter", "cloze_qa"):
        a = {i: v for (m, i, c), v in got.items() if m == "m1" and c == config}
        b = {i: v for (m, i, c), v in got.items() if m == "m2" and c == config}
        both = a.keys() & b.keys()
        out[config] = (sum(a.values()) / len(a), sum(b.values()) / len(b), len(both),
                       sum(a[i] and not b[i] for i in both), sum(b[i] and not a[i] for i in both))
    return out


def test_pair_json_gives_both_accuracies_and_discordant_counts_per_config(db):
    path, cells = db
    r = json.loads(run_cli("report", "--grid", "real", "--json", "--pair", "m1,m2", *FAST,
                           db=path, check=True).stdout)
    want = expected(cells)
    (d,) = r["pair_details"]
    assert (d["a"], d["b"], d["reference"]) == ("m1", "m2", "o0.letter")
    ref = want["o0.letter"]
    assert (d["accuracy_a"], d["accuracy_b"], d["paired_items"], d["only_a"],
            d["only_b"]) == pytest.approx(ref)
    by_config = {c["config"]: c for c in d["configs"]}
    assert list(by_config) == r["grid"]["configs"]
    for config, (acc_a, acc_b, n, only_a, only_b) in want.items():
        c = by_config[config]
        assert (c["accuracy_a"], c["accuracy_b"], c["paired_items"], c["only_a"],
                c["only_b"]) == pytest.approx((acc_a, acc_b, n, only_a, only_b))
    assert by_config["cloze_qa"]["paired_items"] == 11
    # the reference row's counts are the pair's SPEC 6 gap
    pair = next(p for p in r["pairs"] if (p["a"], p["b"]) == ("m1", "m2"))
    assert d["only_a"] - d["only_b"] == pair["gap"]
    plain = json.loads(run_cli("report", "--grid", "real", "--json", *FAST, db=path,
                               check=True).stdout)
    assert "pair_details" not in plain  # only when a pair is named


def test_pair_text_and_markdown_show_them(db):
    path, cells = db
    want = expected(cells)
    text = run_cli("report", "--grid", "real", "--pair", "m1,m2", *FAST, db=path,
                   check=True).stdout
    acc_a, acc_b, n, only_a, only_b = want["o0.letter"]
    assert "Pair m1 vs m2: accuracy % and items only one gets right" in text
    assert (f"at the reference o0.letter: A {100 * acc_a:.1f}%, B {100 * acc_b:.1f}%; "
            f"{only_a} items only A gets right, {only_b} only B, of {n} both answered"
            ) in " ".join(text.split())  # prose wraps to 100 columns
    section = text.split("Pair m1 vs m2")[1]
    row = next(line for line in section.splitlines() if line.startswith("cloze_qa "))
    c = want["cloze_qa"]
    assert row.split() == ["cloze_qa",
                           f"{100 * c[0]:.1f}", f"{100 * c[1]:.1f}", str(c[2]), str(c[3]),
                           str(c[4]), f"{c[3] - c[4]:+d}"]
    md = run_cli("report", "--grid", "real", "--pair", "m1,m2", "--markdown", *FAST,
                 db=path, check=True).stdout
    assert "### Pair m1 vs m2: accuracy % and items only one gets right" in md
    assert f"| cloze_qa | {100 * c[0]:.1f} | {100 * c[1]:.1f} | {c[2]} |" in md


def test_a_synthetic_grid_says_so_in_the_header_and_the_json(db):
    path, _ = db
    for grid, synthetic in (("syn", True), ("real", False)):
        r = json.loads(run_cli("report", "--grid", grid, "--json", *FAST, db=path,
                               check=True).stdout)
        assert r["grid"]["synthetic"] is synthetic
        text = run_cli("report", "--grid", grid, *FAST, db=path, check=True).stdout
        md = run_cli("report", "--grid", grid, "--markdown", *FAST, db=path,
                     check=True).stdout
        head, md_head = text.splitlines()[:3], md.splitlines()[:3]
        assert ("SYNTHETIC" in " ".join(head)) is synthetic
        assert ("SYNTHETIC" in " ".join(md_head)) is synthetic
    text = run_cli("report", "--grid", "syn", "--pair", PAIR, *FAST, db=path,
                   check=True).stdout
    assert text.startswith("Grid (SYNTHETIC")


def test_the_readme_tour_quotes_what_report_pair_prints_on_the_shipped_grid(samples_db):
    """The tour's "33 items only the base build gets right, 12 only int4" is the
    cloze_qa row of `report --pair` on starter-real."""
    from pathlib import Path

    path = samples_db
    r = json.loads(run_cli("report", "--grid", "starter-real", "--json", "--pair",
                           "smollm2-135m-instruct,smollm2-135m-instruct+int4", *FAST,
                           db=path, check=True).stdout)
    rows = {c["config"]: c for c in r["pair_details"][0]["configs"]}
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    for config in ("o0.letter", "cloze_qa"):
        c = rows[config]
        quoted = (f"{100 * c['accuracy_a']:.1f}% against {100 * c['accuracy_b']:.1f}%, "
                  f"{c['only_a']}")
        assert quoted in readme, quoted
    assert (rows["cloze_qa"]["only_a"], rows["cloze_qa"]["only_b"]) == (33, 12)
