"""The Slurm job array of docs/scale.md (examples/slurm/), run as plain processes: three
array tasks at once, then the merge job; the grid equals one single-process run."""

from __future__ import annotations

import os
import subprocess

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.store.store import Store  # noqa: E402
from cli_process import warm_command  # noqa: E402
from helpers import run_cli  # noqa: E402
from test_run_loop import REPO, assert_same_cells, cells_of, write_items  # noqa: E402

SLURM = REPO / "examples" / "slurm"
CONFIGS = "o0.letter,o3.instruct,cloze_bare"


def test_the_job_array_and_merge_give_the_single_process_grid(tiny_folder, tmp_path):
    items = write_items(tmp_path / "items.jsonl", 7)
    run_args = f"--per-benchmark 0 --threads 1 --configs {CONFIGS} --prompt-mode chat"
    whole = tmp_path / "whole.duckdb"
    run_cli("run", "--model", str(tiny_folder), "--items", str(items), "--grid", "g",
            *run_args.split(), db=whole, timeout=300, check=True)
    shim = tmp_path / "bin"  # `fragility-tui` on PATH, as an installed package puts it
    shim.mkdir()
    warm_command(shim)  # forked from the tests' warm server: no torch import per task
    db = tmp_path / "merged.duckdb"
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}", "MODEL": str(tiny_folder),
           "ITEMS": str(items), "GRID": "g", "PARTS": str(tmp_path / "parts"),
           "RUN_ARGS": run_args, "SLURM_ARRAY_TASK_COUNT": "3", "DB": str(db),
           "FRAGILITY_TUI_DB": str(tmp_path / "never.duckdb")}
    tasks = [subprocess.Popen(["bash", str(SLURM / "evaluate.sbatch")], cwd=REPO,
                              env={**env, "SLURM_ARRAY_TASK_ID": str(i)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(3)]
    for task in tasks:
        out, _ = task.communicate(timeout=600)
        assert task.returncode == 0, out[-2000:]
    assert not (tmp_path / "never.duckdb").exists()  # array tasks open no store
    merged = subprocess.run(["bash", str(SLURM / "merge.sbatch")], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert merged.returncode == 0, merged.stderr
    assert "merged" in merged.stdout
    assert_same_cells(cells_of(Store(db), "g"), cells_of(Store(whole), "g"))
    shards = sorted(r.spec["shard"] for r in Store(db).runs("g"))
    assert shards == [[0, 3], [1, 3], [2, 3]]


def test_a_task_outside_an_array_says_what_is_missing(tmp_path):
    proc = subprocess.run(["bash", str(SLURM / "evaluate.sbatch")], cwd=REPO,
                          env={"PATH": os.environ["PATH"], "MODEL": "m", "ITEMS": "i",
                               "GRID": "g", "PARTS": str(tmp_path)},
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "run as an array job" in proc.stderr
