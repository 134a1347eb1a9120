"""`fragility-tui compare` since issue 58 ("settle sooner"): the decision's sequence gets the
whole alpha, and every place that prints or exports a reading outside it (the other target,
the harness-sensitive configs) says it is exploratory."""

from __future__ import annotations

import json

import pytest

from helpers import run_cli

BASE, INT4 = "smollm2-135m-instruct", "smollm2-135m-instruct+int4"


def test_the_json_says_what_each_alpha_covers(shipped_db):
    out = json.loads(run_cli("compare", BASE, INT4, "--grid", "starter-real", "--reference",
                             "cloze_qa", "--json", db=shipped_db, check=True).stdout)
    n_other = len(out["configs_in_view"]) - 1
    # the old keys, the decision's now the whole alpha (alpha/2 before issue 58)
    assert out["alpha_split"]["decision"] == pytest.approx(0.05)
    assert out["alpha_split"]["other_target"] == pytest.approx(0.0125)
    assert n_other * out["alpha_split"]["per_other_config"] == pytest.approx(0.0125)
    g = out["guarantee"]
    assert g["decision_alpha"] == pytest.approx(0.05)
    assert g["exploratory"] == ["harness_sensitive", "other_target"]
    assert g["simultaneous_alpha"] == pytest.approx(0.075)
    assert all(s["other_target"]["exploratory"] and s["harness_sensitive_exploratory"]
               for s in out["path"])
    # seed 0 settles where it did at alpha/2 (docs/spec.md, the live run's 100 items)
    assert out["stop"] == "winner" and out["items_used"] == 100


def test_the_printed_readings_are_labelled_exploratory(shipped_db):
    """The pool scope at o0.letter: the pool's exact Δ at the end, and five configs reverse
    it (the harness-sensitive reading): the header, every progress line and the verdict
    call the readings exploratory."""
    text = run_cli("compare", BASE, INT4, "--grid", "starter-real", "--scope", "pool",
                   db=shipped_db, check=True).stdout
    lines = text.splitlines()
    assert "alpha 0.05 (decision 0.05; exploratory readings: the balanced target, the other " \
           "configs)" in lines[0]
    progress = [ln for ln in lines if "decision: " in ln]
    assert progress and all("balanced (exploratory)" in ln for ln in progress)
    reversed_lines = [ln for ln in progress if "reversed by" in ln]
    assert reversed_lines and all(ln.endswith("(exploratory)") for ln in reversed_lines)
    assert any(ln.startswith("  harness-sensitive (exploratory): ") for ln in lines)
