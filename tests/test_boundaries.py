"""Boundaries read from the source: SQL writes stay in the store, store/ modules use one
another through public names, the app reads run records by attribute, and the run loop and
the app's gateway call methods rather than looking them up by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "fragility_tui"
SQL_WRITE = re.compile(r"\b(INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
                       r"CREATE\s+TABLE)\b")
# A read of the store's tables (a file read through DuckDB, read_parquet, is not one).
STORE_TABLES = ("cells", "runs", "grids", "items", "models", "configs", "meta", "cube_cache",
                "calibration_cache")
SQL_READ = re.compile(r"\bSELECT\b[\s\S]*?\bFROM\s+(%s)\b" % "|".join(STORE_TABLES),
                      re.IGNORECASE)
# Keys only a run record (or its progress) has: read by string key in the app, they mean a
# run passed around as a dict again.
RUN_KEYS = {"run_id", "pid", "pid_started", "cells_done", "cells_total", "events_path",
            "started_at", "ended_at", "created_at", "status", "done", "total", "tok_s", "eta"}


def _sources(*roots: Path):
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            yield path, ast.parse(path.read_text(), filename=str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(REPO)}:{node.lineno}"


def _sql(pattern: re.Pattern, *roots: Path, outside_store: bool = False):
    """(path, node) of every string constant under roots that the pattern matches."""
    for path, tree in _sources(*roots):
        if outside_store and PACKAGE / "store" in path.parents:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and pattern.search(node.value):
                yield path, node


def test_sql_writes_only_in_the_store():
    offenders = [_where(path, node) for path, node in
                 _sql(SQL_WRITE, PACKAGE, REPO / "runners", outside_store=True)]
    assert not offenders, offenders


def test_sql_reads_of_the_store_only_in_the_store():
    offenders = [_where(path, node) for path, node in
                 _sql(SQL_READ, PACKAGE, REPO / "runners", outside_store=True)]
    assert not offenders, offenders
    assert list(_sql(SQL_READ, PACKAGE / "store"))  # not vacuous: the store's reads match


def test_the_scan_sees_sql_writes():
    """The pattern above is not vacuous: the store's own statements match it."""
    kinds = {SQL_WRITE.search(node.value).group(1).split()[0]
             for _, node in _sql(SQL_WRITE, PACKAGE / "store")}
    assert {"INSERT", "DELETE", "CREATE", "UPDATE"} <= kinds, kinds


def test_store_modules_use_no_private_member_of_another_object():
    """`x._name` inside store/ only on self, cls, or a class of the same module."""
    offenders = []
    for path, tree in _sources(PACKAGE / "store"):
        own_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                continue
            value = node.value
            if isinstance(value, ast.Name) and value.id in {"self", "cls", *own_classes}:
                continue
            offenders.append(f"{_where(path, node)}: {ast.unparse(node)}")
    assert not offenders, offenders


def test_the_app_reads_no_run_record_by_string_key():
    offenders = []
    for path, tree in _sources(PACKAGE / "tui"):
        for node in ast.walk(tree):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "get" and node.args
                  and isinstance(node.args[0], ast.Constant)):
                key = node.args[0].value
            if key in RUN_KEYS:
                offenders.append(f"{_where(path, node)}: {ast.unparse(node)}")
    assert not offenders, offenders


def test_the_run_loop_and_the_gateway_look_nothing_up_by_name():
    for path in (REPO / "runners" / "run" / "loop.py", PACKAGE / "tui" / "gateway.py"):
        calls = [_where(path, node) for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                 and node.func.id in {"getattr", "hasattr"}]
        assert not calls, calls
