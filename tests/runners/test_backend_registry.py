"""Backends as plug-ins: the run loop finds a backend by name in the registry and asks it,
never comparing names; a backend registered from this module (one class) runs a whole run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.backends import BACKENDS, BackendInfo, backend_info  # noqa: E402
from fragility_tui.errors import InputError  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from runners.backends.base import backend_for, register_backend  # noqa: E402
from runners.backends.transformers import TransformersBackend  # noqa: E402
from runners.run.loop import Run  # noqa: E402
from test_run_loop import cells_of, spec_for, write_items  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NAMES = "|".join(BACKENDS)


@register_backend("counting", BackendInfo("counting", "unused", "transformers, counted",
                                          ray=False))
class CountingBackend(TransformersBackend):
    """The transformers backend under another name, counting what the loop asks of it."""

    name = "counting"
    asked: list[str] = []

    def configure_process(self, environ) -> dict:
        self.asked.append("configure_process")
        return super().configure_process(environ)

    def prepare(self, spec, device: str) -> list:
        self.asked.append("prepare")
        return super().prepare(spec, device)

    def load(self, prepared, spec) -> tuple:
        self.asked.append("load")
        return super().load(prepared, spec)

    def budget(self, spec, loaded, scorer):
        self.asked.append("budget")
        return super().budget(spec, loaded, scorer)

    def scoring_text(self) -> dict:
        return {"padding": "counted", "decoding": "counted", "likelihood": "counted"}


def test_a_backend_registered_from_a_test_runs_a_whole_run(tiny_folder, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "items.jsonl", 2)
    CountingBackend.asked.clear()
    run = Run(spec_for(tiny_folder, items, backend="counting"), store, display="none")
    assert run.execute() == "finished"
    assert CountingBackend.asked == ["configure_process", "prepare", "load", "budget"]
    assert len(cells_of(store, "g")) == 2 * 26
    fingerprint = store.list_models("g")[0]["fingerprint"]
    assert fingerprint["backend"] == "counting"  # another backend: another setting
    assert store.get_run(run.run_id).provenance["padding"] == "counted"


def test_an_unknown_backend_is_the_users_error_naming_the_flag():
    with pytest.raises(InputError, match="unknown backend 'nope'") as caught:
        backend_for("nope")
    assert caught.value.field == "--backend"


@pytest.mark.parametrize("name", ["transformers", "vllm", "openai"])
def test_every_shipped_backend_is_registered_under_its_table_name(name):
    backend = backend_for(name)  # imports its module; vllm itself is imported only to run
    assert backend.info is backend_info(name)
    assert set(backend.scoring_text()) == {"padding", "decoding", "likelihood"}


def _name_comparisons(path: Path, root: Path = REPO) -> list[str]:
    """`x == "vllm"`, `x != "openai"`, `x in ("vllm", ...)`: a backend chosen by its name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            values = ([operand] if isinstance(operand, ast.Constant)
                      else list(operand.elts) if isinstance(operand, (ast.Tuple, ast.List,
                                                                      ast.Set)) else [])
            if any(isinstance(v, ast.Constant) and isinstance(v.value, str)
                   and re.fullmatch(NAMES, v.value) for v in values):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_backend_name_comparison_outside_the_registry():
    sources = [p for root in ("runners", "fragility_tui", "benchmarks")
               for p in sorted((REPO / root).rglob("*.py"))]
    offenders = [hit for p in sources for hit in _name_comparisons(p)]
    assert not offenders, offenders


def test_the_scan_sees_a_name_comparison(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('def f(spec):\n    return spec.backend == "openai" or spec.backend in '
                     '("vllm", "x")\n')
    assert _name_comparisons(probe, tmp_path) == ["probe.py:2", "probe.py:2"]
