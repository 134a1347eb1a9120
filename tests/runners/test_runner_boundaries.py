"""No import cycle among the runner's modules, imports inside functions included (issue 21):
a cycle means two modules cannot be understood apart, and is where reach-ins grow."""

from __future__ import annotations

import ast

import grimp
import pytest

from helpers import REPO


def _cycles(package: str) -> list[list[str]]:
    graph = grimp.build_graph(package, include_external_packages=False)
    modules = sorted(m for m in graph.modules if m.startswith(package + "."))
    cycles = []
    for a in modules:
        for b in graph.find_modules_directly_imported_by(a):
            if b.startswith(package + ".") and a < b and graph.find_shortest_chain(b, a):
                cycles.append([a, *graph.find_shortest_chain(b, a)])
    return cycles


def test_runners_have_no_import_cycles(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    assert _cycles("runners") == []


def private_reach_ins(folder) -> list[str]:
    """`x._name` where x is not self/cls: a private member used from outside its class."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    # a torch operator's registered name (torch.ops.mkldnn._linear_pointwise):
                    # the library's op, not a member of ours
                    and not ast.unparse(node.value).startswith("torch.ops.")):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_private_member_is_used_from_outside():
    """The seam between prefill and decoding is runners.backends.transformers.model_calls.ModelCalls, not the
    scorer's private attributes."""
    assert private_reach_ins(REPO / "runners") == []
