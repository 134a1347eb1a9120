"""Store and PartsStore both implement CellSink: every method the run loop may call, with
arguments passed the way the protocol writes them."""

from __future__ import annotations

import inspect

import pytest

from fragility_tui.store.parts import PartsStore
from fragility_tui.store.sink import CellSink
from fragility_tui.store.store import Store

P = inspect.Parameter
PROTOCOL_METHODS = sorted(name for name, value in vars(CellSink).items()
                          if callable(value) and not name.startswith("_"))


def _accepts(impl: inspect.Signature, wanted: inspect.Signature) -> list[str]:
    """What of `wanted`'s parameters `impl` cannot take, passed as `wanted` passes them."""
    params = list(impl.parameters.values())
    varargs = any(p.kind is P.VAR_POSITIONAL for p in params)
    varkw = any(p.kind is P.VAR_KEYWORD for p in params)
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)}
    problems = []
    k = 0
    for w in wanted.parameters.values():
        if w.kind is P.POSITIONAL_ONLY:
            if k >= len(positional) and not varargs:
                problems.append(f"positional {w.name}")
            k += 1
        elif w.kind is P.KEYWORD_ONLY and w.name not in by_name and not varkw:
            problems.append(f"keyword {w.name}")
        elif w.kind is P.VAR_KEYWORD and not varkw:
            problems.append(f"**{w.name}")
    # what the implementation requires beyond the protocol would fail the loop's calls
    given = {w.name for w in wanted.parameters.values()}
    for p in params[k:]:
        if p.default is P.empty and p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY) \
                and p.name not in given:
            problems.append(f"requires {p.name}")
    return problems


def test_the_protocol_lists_what_the_loop_calls():
    assert {"create_run", "get_run", "update_run", "events_path_for", "has_grid",
            "grid_meta", "create_grid", "claim_grid", "add_items", "check_model", "record_model",
            "done_keys", "write_cells", "slots_dir"} == set(PROTOCOL_METHODS)


@pytest.mark.parametrize("cls", [Store, PartsStore])
def test_both_stores_implement_the_cell_sink(cls):
    problems = {}
    for name in PROTOCOL_METHODS:
        impl = getattr(cls, name, None)
        assert impl is not None, f"{cls.__name__} has no {name}"
        wanted = inspect.signature(getattr(CellSink, name))
        wanted = wanted.replace(parameters=list(wanted.parameters.values())[1:])  # self
        signature = inspect.signature(impl)
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
        if missing := _accepts(signature, wanted):
            problems[name] = missing
    assert not problems, problems


def test_the_check_fails_for_a_store_missing_an_argument():
    """The signature check above can fail: a write_cells that takes no rows is caught."""
    def write_cells(grid):  # noqa: ARG001
        return 0

    wanted = inspect.signature(CellSink.write_cells)
    wanted = wanted.replace(parameters=list(wanted.parameters.values())[1:])
    assert _accepts(inspect.signature(write_cells), wanted) == ["positional rows"]


def test_instances_are_cell_sinks(tmp_path):
    assert isinstance(Store(tmp_path / "s.duckdb"), CellSink)
    assert isinstance(PartsStore(tmp_path / "parts"), CellSink)
    assert not isinstance(object(), CellSink)
