"""import-log on real lm-evaluation-harness 0.4.13 output (tests/fixtures/logs/lmeval, the
commands in its README): the config read from results_*.json, every sample matched, lm-eval's
own accuracy reproduced from the imported cells; bad logs give one error, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import REPO, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs" / "lmeval"


def _import(db, *paths, check=True, **kw):
    args = ["import-log", *map(str, paths), "--grid", "g", "--json"]
    for k, v in kw.items():
        args += [f"--{k.replace('_', '-')}", v]
    proc = run_cli(*args, db=db)
    if check:
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
    return proc


@pytest.fixture(scope="module")
def lmeval_grid(tmp_path_factory):
    db = tmp_path_factory.mktemp("lmeval") / "s.duckdb"
    outs = [_import(db, LOGS / name, model="smollm2") for name in ("mc", "gen", "mc_chat",
                                                                     "mc_2shot")]
    return db, [r for out in outs for r in out["runs"]]


def test_each_config_is_read_from_the_log_and_reproduces_its_accuracy(lmeval_grid):
    _, runs = lmeval_grid
    by_config = {r["config"]: r for r in runs}
    assert sorted(by_config) == sorted([
        "lm-eval:fragility_starter:acc+k0", "lm-eval:fragility_starter:acc_norm+k0",
        "lm-eval:fragility_starter_gen:exact_match-first_letter+k0",
        "lm-eval:fragility_starter:acc+chat+k0", "lm-eval:fragility_starter:acc_norm+chat+k0",
        "lm-eval:fragility_starter:acc+k2", "lm-eval:fragility_starter:acc_norm+k2"])
    for r in runs:
        assert (r["matched"], r["unmatched"], r["ambiguous"]) == (40, 0, 0)
        assert r["reproduces_log_accuracy"], r
    assert by_config["lm-eval:fragility_starter:acc+k0"]["log_accuracy"] == 0.45
    assert by_config["lm-eval:fragility_starter:acc_norm+k0"]["log_accuracy"] == 0.475
    mc = by_config["lm-eval:fragility_starter:acc+k0"]["axes"]
    assert mc["scoring"] == "likelihood" and mc["chat"] == "off"
    assert by_config["lm-eval:fragility_starter:acc+chat+k0"]["axes"]["chat"] != "off"
    assert by_config["lm-eval:fragility_starter_gen:exact_match-first_letter+k0"][
        "axes"]["scoring"] == "generate"
    # the multiple-choice template is the same at 0 and 2 shots: one shots axis
    assert mc["template"] == by_config["lm-eval:fragility_starter:acc+k2"]["axes"]["template"]


def test_the_report_reads_the_axes_of_imported_configs(lmeval_grid):
    db, _ = lmeval_grid
    r = json.loads(run_cli("report", "--grid", "g", "--json", "--boot", "50",
                           "--random-draws", "10", db=db, check=True).stdout)
    assert r["grid"]["reference"] == "lm-eval:fragility_starter:acc+k0"
    assert {"shots", "metric", "chat"} <= set(r["axes"]["mean"])


def test_the_same_model_and_config_again_is_refused_unless_replace(lmeval_grid, tmp_path):
    db = tmp_path / "s.duckdb"
    shutil.copy(lmeval_grid[0], db)
    proc = _import(db, LOGS / "mc", check=False, model="smollm2")
    assert proc.returncode == 2
    assert "already has 40 cells of model 'smollm2' under lm-eval:fragility_starter:acc+k0" \
        in proc.stderr and "--replace" in proc.stderr
    # it names where the cells there came from, not the log it was given
    samples = next((LOGS / "mc").rglob("samples_*.jsonl"))
    assert f"(imported from {samples.resolve()} on 20" in proc.stderr, proc.stderr
    out = run_cli("import-log", str(LOGS / "mc"), "--grid", "g", "--model", "smollm2",
                  "--replace", db=db, check=True).stdout
    assert "reproduces the log's accuracy 0.450" in out


def test_a_log_named_twice_a_gzipped_log_and_an_unknown_metric(tmp_path):
    """A file named twice (its folder and itself) is read once, not "scored twice"; a
    gzipped samples file is named as such, not "invalid JSON"; an unknown --metric lists the
    task's metrics."""
    samples = next((LOGS / "mc").rglob("samples_*.jsonl"))
    out = _import(tmp_path / "s.duckdb", LOGS / "mc", samples, model="smollm2")
    assert len(out["runs"]) == 2 and out["cells_written"] == 80
    folder, copied = _copy_mc(tmp_path)
    gz = copied.with_name(copied.name[:-len(".jsonl")] + ".jsonl.gz")
    import gzip

    gz.write_bytes(gzip.compress(copied.read_bytes()))
    copied.unlink()
    proc = _import(tmp_path / "t.duckdb", gz, check=False, format="lm-eval")
    assert proc.returncode == 2 and "gzip-compressed: decompress it first" in proc.stderr
    proc = _import(tmp_path / "u.duckdb", samples, check=False, metric="bogus")
    assert proc.returncode == 2
    assert "no samples with metric 'bogus' (the task's metrics: acc, acc_norm)" in proc.stderr


def test_every_imported_log_is_in_the_models_provenance(lmeval_grid, tmp_path):
    """Each config's log is recorded on the model (file, harness, when, the log's own
    provenance), a replaced config's entry with it; the exported provenance lists them.
    Before, only the model's first log was kept, a replaced one stayed on record, and a
    config's source named the last import's path as typed (relative)."""
    db = tmp_path / "s.duckdb"
    shutil.copy(lmeval_grid[0], db)
    from fragility_tui.store.store import Store

    def imports():
        (model,) = Store(db).list_models("g")
        return {e["config"]: e for e in model["provenance"]["imports"]}

    before = imports()
    assert len(before) == 7 and all(Path(e["imported_from"]).is_absolute()
                                    for e in before.values())
    assert before["lm-eval:fragility_starter:acc+k2"]["log"]["n_shot"] == 2
    # the 0-shot configs again from a copy of the log, replaced
    folder, _ = _copy_mc(tmp_path)
    run_cli("import-log", str(folder), "--grid", "g", "--model", "smollm2", "--replace",
            db=db, check=True)
    after = imports()
    assert Path(after["lm-eval:fragility_starter:acc+k0"]["imported_from"]).parent == folder
    assert after["lm-eval:fragility_starter:acc+k2"] == before["lm-eval:fragility_starter:acc+k2"]
    text = run_cli("export", "--grid", "g", "--what", "provenance", "--format", "markdown",
                   "--out", "-", db=db, check=True).stdout
    assert "## Imported logs" in text and "| smollm2 | lm-eval:fragility_starter:acc+k2 | " \
        "lm-eval | samples_fragility_starter_" in text and "| 0.4.13 |" in text
    assert str(tmp_path) not in text  # machine paths reduced to the file they name


def _copy_mc(tmp_path) -> tuple[Path, Path]:
    src = next((LOGS / "mc").rglob("samples_*.jsonl"))
    folder = tmp_path / "log"
    folder.mkdir()
    samples = folder / src.name
    shutil.copy(src, samples)
    shutil.copy(next(src.parent.glob("results*.json")), folder / "results_x.json")
    return folder, samples


def _grids(db):
    return [g["name"] for g in json.loads(run_cli("grids", "--json", db=db,
                                                   check=True).stdout)]


def test_a_samples_file_without_its_results_file(tmp_path):
    folder, samples = _copy_mc(tmp_path)
    (folder / "results_x.json").unlink()
    proc = _import(tmp_path / "s.duckdb", samples, check=False)
    assert proc.returncode == 2 and "no results_*.json beside this samples file" in proc.stderr
    assert samples.name in proc.stderr


def test_duplicate_samples_and_bad_lines_name_the_record(tmp_path):
    folder, samples = _copy_mc(tmp_path)
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join(lines + [lines[3]]) + "\n")
    db = tmp_path / "s.duckdb"
    proc = _import(db, samples, check=False)
    assert proc.returncode == 2 and "is scored twice" in proc.stderr
    assert f"{samples}:4" in proc.stderr and f"{samples}:41" in proc.stderr
    samples.write_text("\n".join(lines[:5] + ['{"doc": 1'] + lines[5:]) + "\n")
    proc = _import(db, samples, check=False)
    assert proc.returncode == 2 and f"{samples}:6" in proc.stderr and "invalid JSON" in proc.stderr
    assert not db.exists() or _grids(db) == []  # nothing half-imported


def test_a_log_whose_items_match_nothing(tmp_path):
    folder, samples = _copy_mc(tmp_path)
    items = tmp_path / "other.jsonl"
    items.write_text(json.dumps({"id": "x1", "benchmark": "other", "question": "Unrelated?",
                                 "choices": ["a", "b", "c", "d"], "gold": 0}) + "\n")
    proc = _import(tmp_path / "s.duckdb", folder, check=False, items=str(items))
    assert proc.returncode == 2 and "matches an item of the grid" in proc.stderr
    assert "0 matched, 40 unmatched" in proc.stderr


def test_a_task_scored_over_five_options_keeps_the_logs_correctness(tmp_path):
    folder, samples = _copy_mc(tmp_path)
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    for rec in records:  # a fifth option, as a five-option task's log has it
        ctx = rec["arguments"]["gen_args_0"]["arg_0"]
        rec["arguments"]["gen_args_4"] = {"arg_0": ctx, "arg_1": " none of these"}
        rec["filtered_resps"].append(["-99.0", "False"])
        rec["resps"].append([["-99.0", "False"]])
        rec["doc"]["choices"] = rec["doc"]["choices"] + ["none of these"]
    samples.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = _import(tmp_path / "s.duckdb", folder, metric="acc")
    (run,) = out["runs"]
    assert run["matched"] == 40 and run["scored_over_more_options"] == 40
    assert run["reproduces_log_accuracy"]
