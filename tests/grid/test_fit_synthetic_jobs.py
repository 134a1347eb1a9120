"""benchmarks/fit_synthetic.py --jobs: grids drawn in worker processes give the committed
summary (the figures of one process, up to BLAS rounding), and a count below 1 is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "benchmarks" / "fit_synthetic.py"
FIT = ROOT / "benchmarks" / "fit_synthetic.json"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_two_workers_give_the_committed_summary(tmp_path):
    out = tmp_path / "fit.json"
    shutil.copy(FIT, out)
    done = _run("--resummarise", "--jobs", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    committed, again = json.loads(FIT.read_text()), json.loads(out.read_text())
    assert again.keys() == committed.keys()
    for key, figure in committed["figures"].items():
        assert again["figures"][key]["inside"] == figure["inside"], key
        for stat in ("mean", "sd", "q05", "q95"):
            assert again["figures"][key][stat] == pytest.approx(figure[stat], rel=1e-9,
                                                                 abs=1e-12), (key, stat)


def test_jobs_below_one_is_refused():
    done = _run("--jobs", "0", "--table")
    assert done.returncode == 2
    assert "--jobs must be at least 1, not 0" in done.stderr
