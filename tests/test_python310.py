"""pyproject allows Python 3.10 (Ubuntu 22.04's default); no 3.10 interpreter is here, so
vermin, set to 3.10, reads the code, tests and benchmarks for anything newer: a stdlib module
(tomllib), a member (typing.Self, asyncio.TaskGroup) or syntax (except*). A 3.11-only import
guarded by `if sys.version_info >= (3, 11)` passes, as keymap.py's is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO


def vermin(*paths: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("vermin")
    exe = str(exe) if exe.exists() else shutil.which("vermin")
    assert exe, "vermin is not installed: `pip install -e .[dev]` (make test installs it)"
    return subprocess.run([exe, "-t=3.10-", "--violations", "--no-tips", "--no-parse-comments",
                           *map(str, paths)], capture_output=True, text=True, timeout=300)


def test_the_code_runs_on_python_3_10():
    proc = vermin(*(REPO / d for d in ("fragility_tui", "runners", "tests", "benchmarks")))
    assert proc.returncode == 0, f"needs a Python newer than 3.10:\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("line, found", [
    ("import tomllib\n", "'tomllib' module requires"),
    ("try:\n    pass\nexcept* ValueError:\n    pass\n", "`except*` requires"),
    ("from typing import Self\n", "'typing.Self' member requires"),
])
def test_the_check_flags_what_3_10_lacks(tmp_path, line, found):
    (tmp_path / "new.py").write_text(line)
    proc = vermin(tmp_path)
    assert proc.returncode != 0 and found in proc.stdout, proc.stdout


def test_a_version_guarded_import_passes(tmp_path):
    (tmp_path / "guarded.py").write_text(
        "import sys\nif sys.version_info >= (3, 11):\n    import tomllib\n"
        "else:\n    import tomli as tomllib\n")
    assert vermin(tmp_path).returncode == 0
