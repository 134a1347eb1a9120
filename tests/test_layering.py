"""Import boundaries of docs/architecture.md, checked in fresh interpreters (like harlequin does)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

HEADLESS = ["fragility_tui.harness.configs", "fragility_tui.items.item", "fragility_tui.store.store",
            "fragility_tui.store.importer", "fragility_tui.grid.simulate",
            "fragility_tui.store.lmeval", "fragility_tui.grid.cube", "fragility_tui.cli"]
OPTIONAL = ["fragility_tui.harness.render", "fragility_tui.harness.parser", "fragility_tui.items.loaders",
            "fragility_tui.analysis.report"]


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = ("import importlib, importlib.util, sys\n"
            f"for m in {modules!r}:\n"
            "    if importlib.util.find_spec(m) is not None: importlib.import_module(m)\n"
            "print(' '.join(sorted({k.split('.')[0] for k in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         check=True).stdout
    return set(out.split())


def test_core_and_cli_never_load_textual_or_torch():
    loaded = _loaded_after_import(HEADLESS + OPTIONAL)
    assert not loaded & {"textual", "torch", "transformers", "optimum"}, loaded


def test_cli_help_stays_light():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "fragility_tui.cli", "--help"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert not imported & {"torch", "transformers", "textual"}, imported & {"torch", "transformers", "textual"}


@pytest.mark.parametrize("package", ["fragility_tui"])
def test_no_module_level_torch_imports_inside_the_app_package(package):
    offenders = []
    for path in (REPO / package).rglob("*.py"):
        for line in path.read_text().splitlines():
            if line.startswith(("import torch", "from torch", "import transformers",
                                "from transformers", "import optimum", "from optimum")):
                offenders.append(f"{path.relative_to(REPO)}: {line}")
    assert not offenders, offenders


def test_import_contracts_hold():
    """The layers and forbidden imports in pyproject.toml ([tool.importlinter])."""
    # the interpreter's own lint-imports: a git worktree has no .venv of its own, and
    # `python -m importlinter.cli` has no main (it exits 0 having checked nothing)
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.exists(), f"{lint} missing: pip install -e .[dev]"
    command = [str(lint)]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 and "0 broken" in proc.stdout, proc.stdout[-3000:]


def test_no_module_over_450_lines():
    long = {str(p.relative_to(REPO)): n for p in [*(REPO / "fragility_tui").rglob("*.py"),
                                                  *(REPO / "runners").rglob("*.py")]
            if (n := len(p.read_text().splitlines())) > 450}
    assert not long, long
