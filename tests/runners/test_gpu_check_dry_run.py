"""`make gpu-check DEVICE=cpu`, the dry run of the GPU check, passes here within its five
minutes (issue 25's acceptance): a change that breaks a path the GPU box runs only under
`make gpu-check` (the families in bf16, the 8B configs' random models, the injected
out-of-memory, quanto) fails here first. It runs with duckdb, textual, platformdirs and gguf
made unimportable, as on the air-gapped box (docs/runner.md), so a runner module that starts
to need one of them breaks this test, not the first GPU run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.starts_first]

REPO = Path(__file__).parents[2]
NOT_ON_THE_BOX = ("duckdb", "_duckdb", "textual", "platformdirs", "gguf")  # _duckdb: its engine
AS_ON_THE_BOX = f"""
import importlib.abc, runpy, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {NOT_ON_THE_BOX!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on the GPU box)")
sys.meta_path.insert(0, Missing())
sys.argv = ["benchmarks/gpu_check.py"] + sys.argv[1:]
runpy.run_path("benchmarks/gpu_check.py", run_name="__main__")
"""


def test_the_cpu_dry_run_passes_within_five_minutes_without_the_boxs_missing_packages(
        tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", AS_ON_THE_BOX, "--device", "cpu", "--out",
                           str(out)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "gpu-check passed" in done.stdout
    assert sorted(p.name for p in out.iterdir()) == ["gpu-check.json", "gpu-check.md"]
    document = json.loads((out / "gpu-check.json").read_text())
    rows = {r["check"]: r for r in document["rows"]}
    assert document["passed"] and not document["failed"]
    for family in ("llama", "gemma3_text"):
        assert rows[f"{family} bf16 vs plain loop"]["verdict"] == "ok"
    for name in ("llama3-8b", "qwen3-8b"):
        assert rows[f"{name} shuffled, budget 512"]["verdict"] == "ok"
        assert f"{name} projected 3679 items x 26 configs" in rows
    assert rows["llama3-8b out-of-memory recovery (injected)"]["verdict"] == "ok"
    assert rows["quanto int4 (fp32)"]["verdict"] == ""
    assert rows["vLLM"]["verdict"] == "SKIP"
    assert not [r for r in rows.values() if r["verdict"] not in ("", "ok", "SKIP")]
    assert "| llama3-8b | llama3-8b shuffled, budget 512 |" in (out / "gpu-check.md").read_text()
