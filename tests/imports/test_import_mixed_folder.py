"""A folder holding several harnesses' logs (as a user's results folder does): every log in
it is imported, each by its own reader, none skipped because another format was found
first; `--format` picks one format's logs out of it."""

from __future__ import annotations

import json
import shutil

from helpers import REPO, STARTER_ITEMS, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs"
PARTS = {  # one log of each harness, as real runs of each wrote them
    "lm": LOGS / "lmeval" / "mc",
    "inspect": LOGS / "inspect" / "logs" / "plain",
    "lighteval": LOGS / "lighteval" / "nochat",
    "eee": LOGS / "eee" / "out_inspect_epochs2",
    "helm": LOGS / "helm" / "runs" / "fragility",
}


def _import(db, folder, *extra):
    return run_cli("import-log", str(folder), "--grid", "g", "--model", "smollm2", "--items",
                   str(STARTER_ITEMS), "--json", *extra, db=db)


def test_every_harness_in_a_folder_is_imported(tmp_path):
    folder = tmp_path / "results"
    for name, source in PARTS.items():
        shutil.copytree(source, folder / name)
    done = _import(tmp_path / "s.duckdb", folder)
    assert done.returncode == 0, done.stderr
    harnesses = {run["config"].split(":")[0] for run in json.loads(done.stdout)["runs"]}
    assert harnesses == {"lm-eval", "inspect", "lighteval", "helm"}  # EEE: Inspect's epochs
    configs = {run["config"] for run in json.loads(done.stdout)["runs"]}
    assert {"inspect:fragility_mc:choice", "inspect:fragility_mc:choice+e1"} <= configs

    only = _import(tmp_path / "only.duckdb", folder, "--format", "lighteval")
    assert only.returncode == 0, only.stderr
    assert {run["config"].split(":")[0] for run in json.loads(only.stdout)["runs"]} == \
        {"lighteval"}


def test_a_folder_without_logs_names_the_formats_read(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no logs here\n")
    done = _import(tmp_path / "s.duckdb", tmp_path / "empty")
    assert done.returncode == 2
    assert "not a log this version reads" in done.stderr and "notes" not in done.stderr
