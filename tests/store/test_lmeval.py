"""lm-evaluation-harness interop on a real lm_eval 0.4.13 run over our own items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli
from fragility_tui.store.store import Store

FIXTURE = Path(__file__).parent / "fixtures" / "lmeval"
SAMPLES = FIXTURE / "samples_fragility_starter.jsonl"
REPORTED = json.loads((FIXTURE / "results.json").read_text())["results"]["fragility_starter"]


@pytest.mark.parametrize("metric", ["acc", "acc_norm"])
def test_real_lmeval_output_imports_with_lmevals_accuracy(tmp_path, metric):
    db = tmp_path / "s.duckdb"
    proc = run_cli("import-lmeval", str(SAMPLES), "--model", "smollm2", "--config", "cloze_qa",
                   "--metric", metric, "--items", str(FIXTURE / "items.jsonl"), db=db, check=True)
    assert "agrees with lm-eval's own" in proc.stdout and "40/40" in proc.stdout
    cube = Store(db).load_cube("lmeval")
    assert cube.shape == (1, 40, 1)
    assert cube.bits.mean() == pytest.approx(REPORTED[f"{metric},none"], abs=1e-12)


def test_export_then_import_round_trips_bits_and_loglikelihoods(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("import-lmeval", str(SAMPLES), "--model", "smollm2", "--config", "cloze_qa",
            db=db, check=True)
    out = tmp_path / "export.jsonl"
    run_cli("export", "--grid", "lmeval", "--format", "lmeval-samples", "--model", "smollm2",
            "--config", "cloze_qa", "--out", str(out), db=db, check=True)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    original = [json.loads(line) for line in SAMPLES.read_text().splitlines()]
    assert [r["doc"] for r in records] == [r["doc"] for r in original]
    assert [r["arguments"] for r in records] == [r["arguments"] for r in original]
    assert [r["doc_hash"] for r in records] == [r["doc_hash"] for r in original]
    assert [r["prompt_hash"] for r in records] == [r["prompt_hash"] for r in original]
    assert [r["acc_norm"] for r in records] == [r["acc_norm"] for r in original]
    run_cli("import-lmeval", str(out), "--model", "again", "--config", "cloze_bare",
            db=db, check=True)
    store = Store(db)
    cube = store.load_cube("lmeval")
    a, b = cube.models.index("smollm2"), cube.models.index("again")
    qa, bare = cube.configs.index("cloze_qa"), cube.configs.index("cloze_bare")
    assert (cube.bits[a, :, qa] == cube.bits[b, :, bare]).all()
    first = cube.items[0]
    cells = {(c["model"], c["config_id"]): c for c in store.item_cells("lmeval", first)}
    assert cells[("smollm2", "cloze_qa")]["scores"] == cells[("again", "cloze_bare")]["scores"]


def test_generation_config_cannot_be_exported_as_lmeval_samples(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("import-lmeval", str(SAMPLES), "--model", "m", "--config", "cloze_qa", db=db, check=True)
    proc = run_cli("export", "--grid", "lmeval", "--format", "lmeval-samples", "--model", "m",
                   "--config", "o0.letter", "--out", str(tmp_path / "x.jsonl"), db=db)
    assert proc.returncode == 2 and "generation" in proc.stderr
    imported = "lm-eval:fragility_starter:acc_norm+k0"  # a config read from a log: no prompts
    proc = run_cli("export", "--grid", "lmeval", "--format", "lmeval-samples", "--model", "m",
                   "--config", imported, "--out", str(tmp_path / "x.jsonl"), db=db)
    assert proc.returncode == 2 and "imported from another harness" in proc.stderr, proc.stderr


def test_a_model_and_config_the_grid_has_is_refused_unless_replace(tmp_path):
    """A second log for a (model, config) the grid holds is refused (it said "imported 0
    cells" with the new log's accuracy, the old cells kept); --replace replaces them."""
    db = tmp_path / "s.duckdb"
    first = ["import-lmeval", str(SAMPLES), "--model", "m", "--config", "cloze_qa"]
    run_cli(*first, "--metric", "acc", db=db, check=True)
    again = run_cli(*first, db=db)
    assert again.returncode == 2
    assert "already has 40 cells of model 'm' under cloze_qa" in again.stderr
    assert "--replace" in again.stderr
    assert Store(db).load_cube("lmeval").bits.mean() == pytest.approx(REPORTED["acc,none"])
    replaced = run_cli(*first, "--replace", db=db, check=True)
    assert "imported 40 cells" in replaced.stdout
    assert Store(db).load_cube("lmeval").bits.mean() == pytest.approx(REPORTED["acc_norm,none"])


@pytest.mark.parametrize("config, message", [
    ("o0.letter", "its scoring is generate"),
    ("o0.letter.lik", "its scoring is letter_lik"),
    ("o0.nonsense", "unknown config id"),
])
def test_only_configs_scored_by_option_text_take_lmeval_samples(tmp_path, config, message):
    db = tmp_path / "s.duckdb"
    proc = run_cli("import-lmeval", str(SAMPLES), "--model", "m", "--config", config, db=db)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1
    done = run_cli("import-lmeval", str(SAMPLES), "--model", "m", "--config", "cloze_qa+k5",
                   db=db, check=True)  # an extension config of the same scoring
    assert "config cloze_qa+k5" in done.stdout


def test_real_cells_do_not_go_into_a_synthetic_grid(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("simulate", "--models", "2", "--items", "40", "--grid", "syn", db=db, check=True)
    for args in (["import-lmeval", str(SAMPLES), "--model", "m", "--config", "cloze_qa"],
                 ["import-log", str(SAMPLES), "--model", "m"]):
        proc = run_cli(*args, "--grid", "syn", "--items", str(FIXTURE / "items.jsonl"), db=db)
        assert proc.returncode == 2 and "is SYNTHETIC" in proc.stderr, (args, proc.stderr)
    assert [m["model"] for m in Store(db).list_models("syn")] == [
        "synthetic-model-01", "synthetic-model-02"]


@pytest.mark.parametrize("content, message", [
    ('{"doc": {}}\n', "missing 'arguments'"),
    ("not json\n", "invalid JSON"),
    ('{"doc": {"id": "zz"}, "arguments": [["Q", " a"], ["Q", " b"]], '
     '"filtered_resps": [["-1", "False"], ["-2", "False"]]}\n', "matches no item"),
    ('{"doc": {}, "arguments": {"gen_args_0": {"arg_0": "Q: x", "arg_1": " a"}}, '
     '"filtered_resps": [["x", "False"]]}\n', "log-likelihood"),
])
def test_malformed_samples_are_rejected_with_the_line(tmp_path, content, message):
    db = tmp_path / "s.duckdb"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    proc = run_cli("import-lmeval", str(bad), "--model", "m", "--config", "cloze_qa",
                   "--items", str(FIXTURE / "items.jsonl"), db=db)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "bad.jsonl:1" in proc.stderr
    assert Store(db).list_grids() == []


@pytest.mark.parametrize("model", ["smollm2-135m-instruct", "smollm2-135m-instruct+int4"])
def test_a_config_of_the_shipped_real_grid_round_trips_through_lmeval_samples(tmp_path, model,
                                                                            samples_db):
    """Issue 6: export one config of the real grid as lm-eval samples, import it back as
    another config of the same grid: the same bit for every item, and the same scores."""
    db = samples_db
    out = tmp_path / "samples.jsonl"
    run_cli("export", "--grid", "starter-real", "--format", "lmeval-samples", "--model", model,
            "--config", "cloze_qa", "--out", str(out), db=db, check=True)
    run_cli("import-lmeval", str(out), "--model", "round-trip", "--config", "cloze_bare",
            "--grid", "starter-real", db=db, check=True)
    store = Store(db)
    cube = store.load_cube("starter-real")
    a, b = cube.models.index(model), cube.models.index("round-trip")
    qa, bare = cube.configs.index("cloze_qa"), cube.configs.index("cloze_bare")
    assert cube.present[a, :, qa].all() and cube.present[b, :, bare].all()
    assert (cube.bits[a, :, qa] == cube.bits[b, :, bare]).all()
    item = cube.items[-1]
    cells = {(c["model"], c["config_id"]): c for c in store.item_cells("starter-real", item)}
    assert cells[(model, "cloze_qa")]["scores"] == cells[("round-trip", "cloze_bare")]["scores"]
