"""One model under two harnesses on the same items: our runner's 26 configs of
SmolLM2-135M-Instruct in the shipped starter-real grid, and lm-eval's real log of the same
model on 40 of those items. Our cloze_qa is lm-eval's acc_norm convention: the two agree on
every item."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import REPO, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs" / "lmeval"
MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def starter_with_lmeval(tmp_path_factory, samples_template):
    db = tmp_path_factory.mktemp("harnesses") / "s.duckdb"
    shutil.copyfile(samples_template, db)  # as `load-samples` leaves it (tests/conftest.py)
    run_cli("import-log", str(LOGS / "mc"), str(LOGS / "gen"), "--grid", "starter-real",
            "--model", MODEL, db=db, check=True)
    return db


def test_the_harnesses_agree_where_their_conventions_do(starter_with_lmeval):
    out = json.loads(run_cli("harnesses", "--grid", "starter-real", "--model", MODEL,
                             "--json", db=starter_with_lmeval, check=True).stdout)
    assert out["harnesses"] == ["fragility-tui", "lm-eval"] and out["items"] == 40
    acc = out["accuracy"]
    assert acc["lm-eval"]["lm-eval:fragility_starter:acc_norm+k0"] == pytest.approx(0.475)
    assert acc["fragility-tui"]["cloze_qa"] == pytest.approx(0.475)
    assert all(("cloze_qa" in right) == ("lm-eval:fragility_starter:acc_norm+k0" in right)
               for right in out["disagreements"].values())
    assert out["agree_right"] + out["agree_wrong"] + out["disagree"] == 40
    # the harness neighbourhood of o0.letter: lm-eval's generation config (same scoring)
    assert out["harness_preserved_fraction"] == pytest.approx(0.6)


def test_a_model_under_one_harness_is_told_what_to_do(starter_with_lmeval):
    proc = run_cli("harnesses", "--grid", "starter-real", "--model", "gemma3-270m",
                   db=starter_with_lmeval)
    assert proc.returncode == 2 and "one harness only" in proc.stderr
    text = run_cli("harnesses", "--grid", "starter-real", "--model", MODEL, "--show", "2",
                   db=starter_with_lmeval, check=True).stdout
    assert "2 harnesses, 40 items" in text and "they disagree:" in text
    disagree = int(text.split("they disagree: ")[1].split()[0])
    listed = [line for line in text.splitlines() if ": right under " in line]
    assert len(listed) == 2  # the rest said, not silently dropped
    assert f"… {disagree - 2} more items they disagree on (--show N lists N, --json all)" \
        in text
    rows = [line for line in text.splitlines() if line.rstrip().endswith("%")]
    assert len({line.rindex("%") for line in rows}) == 1  # one column, however long the ids
