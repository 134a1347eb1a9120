"""`fragility-tui compare A B --grid NAME` (issue 45): the sequential comparison replayed over
recorded cells, its verdict, its errors, and a grid whose run was cut short."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from helpers import run_cli

BASE, INT4 = "smollm2-135m-instruct", "smollm2-135m-instruct+int4"


def _compare(db, *args):
    proc = run_cli("compare", *args, "--json", db=db, check=True)
    return json.loads(proc.stdout)


def test_the_real_pair_under_cloze_qa_stops_early_with_the_base_build_winning(shipped_db):
    out = _compare(shipped_db, BASE, INT4, "--grid", "starter-real", "--reference", "cloze_qa")
    assert out["scope"] == "population" and out["replay"] is True
    assert out["stop"] == "winner" and out["winner"] == 1
    assert out["pool"] == 265 and out["items_used"] < out["pool"]
    assert out["items_used"] == out["path"][-1]["items"] and out["items_used"] % 25 == 0
    assert out["pool_delta"] == pytest.approx((115 - 94) / 265)  # 43.4% vs 35.5%
    last = out["path"][-1]
    assert last["lower"] > 0 and last["lower"] <= out["pool_delta"] <= last["upper"]
    assert not any(s["lower"] > 0 and s["delta"] >= 0.02 for s in out["path"][:-1])
    assert out["seconds_used"] == pytest.approx(out["seconds_per_item"] * out["items_used"])
    # swapping A and B mirrors the path
    mirror = _compare(shipped_db, INT4, BASE, "--grid", "starter-real", "--reference",
                      "cloze_qa")
    assert mirror["winner"] == -1 and mirror["items_used"] == out["items_used"]


def test_the_reference_o0_letter_runs_the_pool_out(shipped_db):
    out = _compare(shipped_db, BASE, INT4, "--grid", "starter-real", "--chunk", "50")
    assert out["reference"] == "o0.letter" and out["stop"] == "pool-exhausted"
    assert out["settled"] is None and out["winner"] is None  # as SPEC 9: underpowered
    assert out["items_used"] == 265 and [s["items"] for s in out["path"]][-2:] == [250, 265]
    assert out["path"][-1]["lower"] < 0 < out["path"][-1]["upper"]
    # the pool's own Δ (-0.4 points) is exact once every item is drawn: equivalent on it
    pool = _compare(shipped_db, BASE, INT4, "--grid", "starter-real", "--scope", "pool")
    assert pool["stop"] == "pool-exhausted" and pool["settled"] == "equivalent"
    assert pool["path"][-1]["lower"] == pytest.approx(-1 / 265)
    text = run_cli("compare", BASE, INT4, "--grid", "starter-real", "--max-items", "60",
                   db=shipped_db, check=True).stdout
    assert "verdict: not settled (budget" in text and "60 of 265 items used" in text
    text = run_cli("compare", BASE, INT4, "--grid", "starter-real", "--chunk", "50",
                   db=shipped_db, check=True).stdout  # the reason says more than its name
    assert "verdict: not settled (pool-exhausted: every item of the pool used)" in text


@pytest.mark.parametrize("args, message", [
    ((BASE, "nope"), "unknown model(s) nope"),
    ((BASE, BASE), "name the same model"),
    ((BASE, INT4, "--chunk", "0"), "--chunk"),
    ((BASE, INT4, "--reference", "o9.letter"), "unknown config"),
])
def test_bad_input_is_one_error_line_and_exit_2(shipped_db, args, message):
    proc = run_cli("compare", *args, "--grid", "starter-real", db=shipped_db)
    assert proc.returncode == 2 and message in proc.stderr
    assert proc.stderr.count("error:") == 1


def _write(path, bits, keep):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "item", "benchmark", "config", "correct"])
        for m, name in enumerate(("a", "b")):
            for i in range(bits.shape[1]):
                if m == 1 and not keep[i]:
                    continue
                bench = "arc" if i % 2 else "mmlu"
                for c, config in enumerate(("o0.letter", "cloze_qa")):
                    w.writerow([name, f"{bench}/q{i:03d}", bench, config,
                                str(bool(bits[m, i, c])).lower()])


def test_a_cut_short_grid_stops_awaiting_cells_and_the_rerun_follows_the_same_path(tmp_path):
    rng = np.random.default_rng(0)
    bits = rng.random((2, 160, 2)) < np.array([0.6, 0.45])[:, None, None]
    db = tmp_path / "c.duckdb"
    full = _compare_after_import(db, tmp_path / "full.csv", bits, np.ones(160, bool), "full")
    # model b killed after the first 70 items of the seeded order: its other cells missing
    order = [int(s.split("q")[1]) for s in full["order_items"][:70]]
    keep = np.zeros(160, dtype=bool)
    keep[order] = True
    part = _compare_after_import(db, tmp_path / "part.csv", bits, keep, "part")
    assert part["stop"] == "awaiting-cells" and part["items_used"] == 60
    assert len(full["path"]) > 3 and part["path"] == full["path"][:3]


def _compare_after_import(db, path, bits, keep, grid):
    _write(path, bits, keep)
    run_cli("import", str(path), "--grid", grid, db=db, check=True)
    out = _compare(db, "a", "b", "--grid", grid, "--chunk", "20")
    return out


# -- issue 58 ------------------------------------------------------------------------------

def test_a_replay_with_another_seed_or_reference_says_the_first_verdict_stands(samples_db):
    db = samples_db
    args = (BASE, INT4, "--grid", "starter-real")
    first = _compare(db, *args, "--reference", "cloze_qa")
    assert first["independent_evidence"] is True
    assert first["first_comparison"]["seed"] == 0
    assert first["first_comparison"]["result"]["winner"] == BASE
    # another seed, the pair named the other way round: the first one stands
    shopped = run_cli("compare", INT4, BASE, *args[2:], "--reference", "cloze_qa",
                      "--seed", "3", db=db, check=True).stdout
    assert "first comparison: this pair (observed target) was first compared in this grid "\
           "at reference cloze_qa, seed 0" in shopped
    assert f"winner {BASE} after 100 of 265 items. That verdict stands" in shopped
    assert "not independent evidence" in shopped
    other = _compare(db, *args, "--seed", "3")  # another reference
    assert other["independent_evidence"] is False
    assert (other["first_comparison"]["reference"], other["first_comparison"]["seed"]) == \
        ("cloze_qa", 0)
    again = _compare(db, *args, "--reference", "cloze_qa")  # the first one, replayed
    assert again["independent_evidence"] is True and again["path"] == first["path"]
    # a replay spent nothing: it says what it used, never what it "saved"
    text = run_cli("compare", *args, "--reference", "cloze_qa", db=db, check=True).stdout
    assert "100 of 265 items used" in text and "saved" not in text
    assert "first comparison:" not in text
    # the first one's seed and reference at another margin or chunk is another look: the
    # first verdict is neither overwritten nor taken for this one's
    for flag, value, said in (("--margin", "20", "margin ±20 points (first: ±2 points)"),
                              ("--chunk", "300", "chunk 300 (first: 25)")):
        looked = run_cli("compare", *args, "--reference", "cloze_qa", flag, value,
                         db=db, check=True).stdout
        assert said in looked and "not independent evidence" in looked, looked
        assert _compare(db, *args, "--reference", "cloze_qa", flag, value)[
            "independent_evidence"] is False
    assert _compare(db, *args, "--reference", "cloze_qa")["first_comparison"] == \
        first["first_comparison"]


def test_json_margin_points_and_the_balanced_targets_own_pool_delta(shipped_db):
    out = _compare(shipped_db, BASE, INT4, "--grid", "starter-real", "--target", "balanced",
                   "--margin", "3", "--chunk", "300")
    assert out["margin_points"] == 3 and out["margin"] == pytest.approx(0.03)
    observed = _compare(shipped_db, BASE, INT4, "--grid", "starter-real", "--chunk", "300")
    assert observed["pool_delta"] == pytest.approx(out["path"][-1]["other_target"]["delta"])
    # balanced: the benchmarks' mean Δ, the target's own figure, not the observed one
    assert out["pool_delta"] == pytest.approx(out["path"][-1]["delta"])
    assert out["pool_delta"] != pytest.approx(observed["pool_delta"])


def test_a_config_the_pair_lacks_does_not_block_the_pair(tmp_path):
    rng = np.random.default_rng(1)
    bits = rng.random((2, 60, 2)) < np.array([0.7, 0.4])[:, None, None]
    db = tmp_path / "c.duckdb"
    full = _compare_after_import(db, tmp_path / "full.csv", bits, np.ones(60, bool), "g")
    # the same cells, and a third model under a config the pair was never run in
    with open(tmp_path / "full.csv", "a", newline="") as fh:
        w = csv.writer(fh)
        for i in range(60):
            bench = "arc" if i % 2 else "mmlu"
            w.writerow(["c", f"{bench}/q{i:03d}", bench, "o1.letter", "true"])
    run_cli("import", str(tmp_path / "full.csv"), "--grid", "h", db=db, check=True)
    out = _compare(db, "a", "b", "--grid", "h", "--chunk", "20")
    assert out["stop"] != "awaiting-cells" and out["items_used"] > 0
    assert out["path"] == full["path"] and "o1.letter" not in out["configs_in_view"]
