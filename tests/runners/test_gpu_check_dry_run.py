"""`make gpu-check DEVICE=cpu`, the dry run of the GPU check, passes here within its five
minutes (issue 25's acceptance): a change that breaks a path the GPU box runs only under
`make gpu-check` (the bf16 twin of an fp32 model, the injected out-of-memory, quanto) fails
here first. It broke once unseen: a deep copy of a model whose CPU linears are
oneDNN-packed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.shared]

REPO = Path(__file__).parents[2]


def test_the_cpu_dry_run_passes_within_five_minutes(tmp_path):
    table = tmp_path / "gpu-check.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--device", "cpu",
                           "--json", str(table)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "gpu-check passed" in done.stdout
    rows = {r["check"]: r for r in json.loads(table.read_text())}
    assert rows["fp32 batched vs plain loop"]["verdict"] == "ok"
    assert rows["out-of-memory recovery (injected)"]["verdict"] == "ok"
    assert not [r for r in rows.values() if r["verdict"] not in ("", "ok")]
