"""import-log on the Open LLM Leaderboard's published details (lm-eval's --log_samples shape
on its leaderboard_* tasks), tested on tests/fixtures/logs/open_llm_leaderboard: a fixture
WRITTEN FROM THE PUBLISHED SCHEMA, not downloaded and not a real run (its README gives the
sources). MMLU-Pro scored over ten lettered options with `acc`, GPQA over four shuffled
"(A)".."(D)" labels with `acc_norm` only, the chat template applied: every sample matched to
the items file by content, the log's own accuracy reproduced, the axes read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import REPO, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs" / "open_llm_leaderboard"
RUN = LOGS / "fixture-org__schema-example-1b-instruct"
STAMP = "2024-11-20T14-32-05.218047"
ITEMS = LOGS / "items.jsonl"
MMLU_PRO = "lm-eval:leaderboard_mmlu_pro:acc+chat+k5"
GPQA = "lm-eval:leaderboard_gpqa_main:acc_norm+chat+k0"


def _import(db, *paths, items: Path | None = ITEMS, check=True):
    args = ["import-log", *map(str, paths), "--grid", "g", "--json"]
    if items is not None:
        args += ["--items", str(items)]
    proc = run_cli(*args, db=db)
    if check:
        assert proc.returncode == 0, proc.stderr
        return {r["config"]: r for r in json.loads(proc.stdout)["runs"]}
    return proc


def _cells(db):
    from fragility_tui.store.store import Store

    with Store(db).connect() as con:
        rows = con.execute("SELECT config_id, item_uid, correct, pred, permutation, scores "
                           "FROM cells WHERE grid = 'g' ORDER BY ALL").fetchall()
    return {(c, uid): (correct, pred, perm, scores) for c, uid, correct, pred, perm, scores
            in rows}


def _lines(task: str) -> list[dict]:
    path = RUN / f"samples_{task}_{STAMP}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    db = tmp_path_factory.mktemp("olb") / "s.duckdb"
    return db, _import(db, LOGS)


def test_every_sample_matches_and_the_leaderboards_accuracy_is_reproduced(imported):
    _, runs = imported
    assert sorted(runs) == [GPQA, MMLU_PRO]
    results = json.loads((RUN / f"results_{STAMP}.json").read_text(encoding="utf-8"))
    for config, task, key in ((MMLU_PRO, "leaderboard_mmlu_pro", "acc,none"),
                              (GPQA, "leaderboard_gpqa_main", "acc_norm,none")):
        r = runs[config]
        assert (r["matched"], r["unmatched"], r["ambiguous"]) == (10, 0, 0)
        assert r["log_accuracy"] == results["results"][task][key]
        assert r["reproduces_log_accuracy"] and r["accuracy"] == r["log_accuracy"]
        assert r["model"] == "schema-example-1b-instruct"  # model_name's basename
    assert runs[MMLU_PRO]["log_accuracy"] == 0.5 and runs[GPQA]["log_accuracy"] == 0.4
    # MMLU-Pro's ten options against our four-option items: the log's correctness is kept
    assert runs[MMLU_PRO]["scored_over_more_options"] == 10
    assert runs[GPQA]["scored_over_more_options"] == 0


def test_the_axes_are_read_from_the_results_file(imported):
    from fragility_tui.harness.config_axes import merge_axes

    _, runs = imported
    results = json.loads((RUN / f"results_{STAMP}.json").read_text(encoding="utf-8"))
    chat = results["chat_template_sha"][:12]
    mmlu, gpqa = (merge_axes(c, runs[c]["axes"]) for c in (MMLU_PRO, GPQA))
    assert {k: mmlu[k] for k in ("harness", "task", "metric", "shots", "chat", "scoring")} == {
        "harness": "lm-eval", "task": "leaderboard_mmlu_pro", "metric": "acc", "shots": "5",
        "chat": chat, "scoring": "likelihood"}
    assert {k: gpqa[k] for k in ("task", "metric", "shots", "chat")} == {
        "task": "leaderboard_gpqa_main", "metric": "acc_norm", "shots": "0", "chat": chat}
    assert mmlu["template"] != gpqa["template"]  # each task's doc_to_text / doc_to_choice


def test_the_cells_put_the_logs_picks_in_the_items_order(imported):
    """GPQA's options were shuffled (process_docs): the order shown is each cell's
    permutation and the pick is stored in the item's order; an MMLU-Pro pick among the six
    options our four-option item leaves out is -1."""
    db, _ = imported
    cells = _cells(db)
    items = {json.loads(line)["id"]: json.loads(line) for line in ITEMS.read_text().splitlines()}
    for line in _lines("leaderboard_gpqa_main"):
        doc = line["doc"]
        correct, pred, perm, scores = cells[(GPQA, f"gpqa_main/{doc['Record ID']}")]
        shown = [doc[f"choice{k}"] for k in range(1, 5)]
        native = items[doc["Record ID"]]["choices"]
        assert perm == "".join(str(native.index(c)) for c in shown)
        lls = [float(ll) for ll, _ in line["filtered_resps"]]
        assert native[pred] == shown[lls.index(max(lls))]
        assert correct == (pred == 0) == bool(line["acc_norm"])  # gold is native option 0
        assert sorted(scores) == sorted(lls)
    out_of_item = 0
    for line in _lines("leaderboard_mmlu_pro"):
        doc = line["doc"]
        correct, pred, perm, scores = cells[(MMLU_PRO, f"mmlu_pro/{doc['question_id']}")]
        lls = [float(ll) for ll, _ in line["filtered_resps"]]
        picked = doc["options"][lls.index(max(lls))]
        item = items[str(doc["question_id"])]
        kept = [item["choices"][item["gold"]]] + [c for c in item["choices"]
                                                  if c != item["choices"][item["gold"]]][:3]
        if picked in kept:
            assert pred is not None and pred >= 0
        else:
            assert pred == -1
            out_of_item += 1
        assert correct == bool(line["acc"]) and perm is None and scores is None
    assert out_of_item == 2


def test_without_items_the_logs_docs_make_them(tmp_path):
    """MMLU-Pro's doc holds the whole item (question, options, answer_index), GPQA's the
    question and its four shuffled choices: with no --items and a new grid they become the
    grid's items (four options: MMLU-Pro's gold and its first three distractors)."""
    runs = _import(tmp_path / "s.duckdb", LOGS, items=None)
    for r in runs.values():
        assert (r["matched"], r["unmatched"]) == (10, 0) and r["reproduces_log_accuracy"]
    from fragility_tui.store.store import Store

    items = {it.item_uid: it for it in Store(tmp_path / "s.duckdb").load_items("g")}
    assert len(items) == 20
    first = _lines("leaderboard_mmlu_pro")[0]["doc"]
    item = items["leaderboard_mmlu_pro/0"]
    assert item.question == first["question"] and len(item.choices) == 4
    assert item.choices[item.gold] == first["options"][first["answer_index"]]


def _copy_run(tmp_path: Path) -> Path:
    folder = tmp_path / RUN.name
    shutil.copytree(RUN, folder)
    return folder


def test_the_june_2024_details_named_json_import_the_same(tmp_path):
    """lm-eval named samples files `.json` (JSON lines) until its PR #1930 of 2024-06-13:
    the leaderboard's first details keep that name."""
    folder = _copy_run(tmp_path)
    for path in folder.glob("samples_*.jsonl"):
        path.rename(path.with_suffix(".json"))
    runs = _import(tmp_path / "s.duckdb", folder)
    assert sorted(runs) == [GPQA, MMLU_PRO]
    assert all(r["matched"] == 10 and r["reproduces_log_accuracy"] for r in runs.values())
    assert all(r["source"].endswith(".json") for r in runs.values())


def test_samples_beside_another_runs_results_are_refused(tmp_path):
    """A model's details folder holds every run (results_<stamp>.json with its
    samples_<task>_<stamp>.jsonl): a samples file is read with its own run's results, and
    without them the import stops rather than read another run's config."""
    folder = _copy_run(tmp_path)
    other = "2025-01-27T10-10-36.877664"
    (folder / f"results_{STAMP}.json").rename(folder / f"results_{other}.json")
    db = tmp_path / "s.duckdb"
    proc = _import(db, folder, check=False)
    assert proc.returncode == 2
    assert f"no results file of this run ({STAMP})" in proc.stderr
    assert f"results_{other}.json is another run's" in proc.stderr
    assert not db.exists() or json.loads(run_cli("grids", "--json", db=db,
                                                 check=True).stdout) == []
    # with both runs' results there, each samples file takes its own
    shutil.copy(folder / f"results_{other}.json", folder / f"results_{STAMP}.json")
    assert _import(db, folder)[MMLU_PRO]["reproduces_log_accuracy"]


def test_letters_without_option_texts_are_not_matched_by_content(tmp_path):
    """The leaderboard's tasks score the options' letters; the texts are in the doc. A doc
    without them leaves only letters, which are no item's options: nothing is guessed."""
    folder = _copy_run(tmp_path)
    path = folder / f"samples_leaderboard_mmlu_pro_{STAMP}.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        del line["doc"]["options"]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    proc = _import(tmp_path / "s.duckdb", path, check=False)
    assert proc.returncode == 2 and "matches an item of the grid" in proc.stderr
    assert "0 matched, 10 unmatched" in proc.stderr
