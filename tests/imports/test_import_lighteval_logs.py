"""import-log on real lighteval 0.13.0 output (tests/fixtures/logs/lighteval, the commands in
its README): a details parquet per task (rows not in item order, our id in
doc.specific.item_id) with results_*.json beside it; one config per metric, every sample
matched, lighteval's own accuracy reproduced; the same model under lighteval and lm-eval
right on the same items; bad details give one error naming the file and write nothing."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import REPO, import_logs as _import, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs" / "lighteval"
LMEVAL = REPO / "tests" / "fixtures" / "logs" / "lmeval"
ITEMS = REPO / "sample_grids" / "starter_items.jsonl"
REPORTED = {"nochat": {"acc": 0.45, "acc_norm": 0.475},
            "chat": {"acc": 0.425, "acc_norm": 0.375}}


def _details(run: str):
    (path,) = (LOGS / run).rglob("details_*.parquet")
    return path


def _grid_names(db):
    return [g["name"] for g in json.loads(run_cli("grids", "--json", db=db,
                                                   check=True).stdout)]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    db = tmp_path_factory.mktemp("lighteval") / "s.duckdb"
    return {run: {r["config"]: r for r in _import(db, LOGS / run)} for run in REPORTED}


@pytest.mark.parametrize("run", list(REPORTED))
def test_each_run_matches_every_sample_and_reproduces_lightevals_accuracy(imported, run):
    runs = imported[run]
    chat = "+chat" if run == "chat" else ""
    assert sorted(runs) == [f"lighteval:fragility_mc:acc{chat}+k0",
                            f"lighteval:fragility_mc:acc_norm{chat}+k0"]
    for metric, reported in REPORTED[run].items():
        r = runs[f"lighteval:fragility_mc:{metric}{chat}+k0"]
        assert (r["matched"], r["unmatched"], r["ambiguous"], r["cells"]) == (40, 0, 0, 40)
        assert r["log_accuracy"] == reported and r["reproduces_log_accuracy"], r
        assert r["model"] == "smollm2-hf-t4"  # the results file's model_name, its basename
        assert r["axes"]["scoring"] == "likelihood"
        assert (r["axes"]["chat"] == "off") == (run == "nochat")


def test_the_chat_template_is_its_own_axis_the_prompt_template_is_shared(imported):
    plain = imported["nochat"]["lighteval:fragility_mc:acc+k0"]["axes"]
    chat = imported["chat"]["lighteval:fragility_mc:acc+chat+k0"]["axes"]
    assert plain["template"] == chat["template"] and plain["chat"] != chat["chat"]


def test_the_text_summary_says_the_accuracy_is_reproduced(tmp_path):
    out = run_cli("import-log", str(LOGS / "chat"), "--grid", "g", "--items", str(ITEMS),
                  "--metric", "acc_norm", db=tmp_path / "s.duckdb", check=True).stdout
    assert "lighteval:fragility_mc:acc_norm+chat+k0: 40 cells" in out
    assert "reproduces the log's accuracy 0.375" in out and ":acc+chat" not in out


def test_lighteval_and_lm_eval_get_the_same_items_right(tmp_path):
    """nochat is lm-eval's mc run under lighteval (log-likelihoods agree to 4e-5): both
    harnesses' acc and acc_norm configs are right on exactly the same items."""
    db = tmp_path / "s.duckdb"
    _import(db, LOGS / "nochat", LMEVAL / "mc", extra=("--model", "smollm2"))
    view = json.loads(run_cli("harnesses", "--grid", "g", "--model", "smollm2", "--json",
                              db=db, check=True).stdout)
    assert view["items"] == 40 and set(view["harnesses"]) == {"lighteval", "lm-eval"}
    for metric in ("acc", "acc_norm"):
        ours = f"lighteval:fragility_mc:{metric}+k0"
        theirs = f"lm-eval:fragility_starter:{metric}+k0"
        assert view["accuracy"]["lighteval"][ours] == view["accuracy"]["lm-eval"][theirs]
        for item, right in view["disagreements"].items():
            assert (ours in right) == (theirs in right), (item, right)
    from fragility_tui.store.store import Store

    with Store(db).connect() as con:
        rows = con.execute("SELECT config_id, item_uid, pred, scores FROM cells WHERE grid = "
                           "'g' AND config_id LIKE '%acc_norm%'").fetchall()
    by_harness = {}
    for config, uid, pred, scores in rows:
        by_harness.setdefault(config.split(":")[0], {})[uid] = (pred, scores)
    assert by_harness["lighteval"].keys() == by_harness["lm-eval"].keys()
    for uid, (pred, scores) in by_harness["lighteval"].items():
        their_pred, their_scores = by_harness["lm-eval"][uid]
        assert pred == their_pred
        assert max(abs(a - b) for a, b in zip(scores, their_scores)) < 1e-4


def _copy_run(tmp_path, run, edit=None):
    folder = tmp_path / run
    shutil.copytree(LOGS / run, folder)
    if edit is not None:
        (results,) = folder.rglob("results_*.json")
        data = json.loads(results.read_text())
        edit(data)
        results.write_text(json.dumps(data))
    return folder


def test_chat_is_told_from_the_tokens_wherever_the_log_is_read(imported, tmp_path):
    """override_chat_template null means "if the tokenizer has one", which the log does not
    record: the details' token ids say whether a chat template was applied, whatever model
    folder the log names (it is never looked for on this machine)."""
    def elsewhere(data):
        data["config_general"]["model_name"] = "/not/here/smollm2-hf-t4"
        data["config_general"]["model_config"]["model_name"] = "/not/here/smollm2-hf-t4"
        data["config_general"]["model_config"]["override_chat_template"] = None

    runs = _import(tmp_path / "s.duckdb", _copy_run(tmp_path, "chat", elsewhere),
                   _copy_run(tmp_path, "nochat", elsewhere))
    by_config = {r["config"]: r for r in runs}
    assert sorted(by_config) == sorted([*imported["chat"], *imported["nochat"]])
    chat = "lighteval:fragility_mc:acc+chat+k0"
    assert by_config[chat]["axes"] == imported["chat"][chat]["axes"]
    assert by_config["lighteval:fragility_mc:acc+k0"]["axes"]["chat"] == "off"


def test_details_without_their_results_file(tmp_path):
    (tmp_path / "x").mkdir()
    details = tmp_path / "x" / _details("nochat").name
    shutil.copy(_details("nochat"), details)
    runs = _import(tmp_path / "s.duckdb", details, extra=("--model", "smollm2"))
    assert sorted(r["config"] for r in runs) == ["lighteval:fragility_mc:acc+k0",
                                                 "lighteval:fragility_mc:acc_norm+k0"]
    assert all(r["log_accuracy"] is None and r["matched"] == 40 for r in runs)
    assert {r["accuracy"] for r in runs} == {0.45, 0.475}


def test_a_metric_the_details_do_not_have(tmp_path):
    proc = _import(tmp_path / "s.duckdb", LOGS / "nochat", check=False,
                   extra=("--metric", "exact_match"))
    assert proc.returncode == 2 and "no metric 'exact_match'" in proc.stderr
    assert "acc, acc_norm" in proc.stderr and "details_fragility_mc|0_" in proc.stderr


def test_bad_details_are_one_error_naming_the_file_and_nothing_is_written(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(_details("nochat"))
    db = tmp_path / "s.duckdb"
    no_metric = tmp_path / "details_fragility_mc|0_x.parquet"
    pq.write_table(table.drop_columns(["metric"]), no_metric)
    proc = _import(db, no_metric, check=False)
    assert proc.returncode == 2 and str(no_metric) in proc.stderr
    assert "no struct column metric" in proc.stderr
    garbage = tmp_path / "details_garbage|0_x.parquet"
    garbage.write_bytes(b"PAR1 this is not a parquet file")
    proc = _import(db, garbage, check=False)
    assert proc.returncode == 2 and str(garbage) in proc.stderr
    assert "not a readable parquet file" in proc.stderr
    # a row without its acc_norm value: the error names the row
    metric = table.column("metric").combine_chunks()
    acc_norm = metric.field("acc_norm").to_pylist()
    acc_norm[3] = None
    holed = pa.StructArray.from_arrays([metric.field("acc"), pa.array(acc_norm, pa.int64())],
                                       names=["acc", "acc_norm"])
    missing = tmp_path / "details_fragility_mc|0_y.parquet"
    pq.write_table(table.set_column(table.column_names.index("metric"), "metric", holed),
                   missing)
    proc = _import(db, missing, check=False)
    assert proc.returncode == 2 and f"{missing}#row 3" in proc.stderr
    assert "has no acc_norm value" in proc.stderr
    assert not db.exists() or _grid_names(db) == []
