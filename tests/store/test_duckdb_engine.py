"""The store runs SQL on DuckDB's engine alone (`_duckdb`) and loads the `duckdb` package's
Python layer only where a connection needs it (store/connection.py, `relational`): a
one-shot `report` skips ~45 ms of start-up, and every path that registers Arrow data or
builds a relation still works from a fresh interpreter, where nothing loaded the package
first."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import textwrap

import pytest

from helpers import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("_duckdb") is None,
                                reason="this duckdb has no top-level engine module")

SETUP = """
import sys
from pathlib import Path
from fragility_tui.store.store import Store
from fragility_tui.store.importer import write_synthetic_grid, import_long_grid
from fragility_tui.grid.simulate import simulate
assert "duckdb" not in sys.modules, "the package was loaded before the path under test"
store = Store(Path({db!r}))
"""

# Each in a fresh interpreter: one path's import of the package must not help another.
PATHS = {
    "cells through the Store API": """
        from fragility_tui.items.item import Item
        from fragility_tui.store.schema import CellRow
        store.create_grid("api")
        store.add_items("api", [Item("b/q0", "b", None, "q", ("x", "y"), 0)])
        assert store.write_cells("api", [CellRow("m", "b/q0", "o0.letter", True, 0)]) == 1
        """,
    "a simulated grid (cube cells registered)": """
        print(write_synthetic_grid(store, simulate(3, 40, seed=1), "sim")["cells"])
        """,
    "a long grid imported from CSV": """
        Path({csv!r}).write_text("model,item,config,correct\\nm1,b/q0,o0.letter,1\\n"
                                 "m2,b/q0,o0.letter,0\\n")
        import_long_grid(store, {csv!r}, "long")
        assert store.count_cells("long") == 2
        """,
    "a cube built from cells (cold cache)": """
        with store.connect() as con:
            models, configs, bits, present = store.cube_from_cells(con, "sim")
        assert len(models) == 3 and present.any()
        """,
    "an export": """
        assert store.export_cells("sim").num_rows == 3 * 40 * 26
        """,
}


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_the_engine_is_what_the_package_exports():
    import _duckdb
    import duckdb

    for name in ("connect", "DuckDBPyConnection", "Error", "IOException", "CatalogException"):
        assert getattr(duckdb, name) is getattr(_duckdb, name), name


def test_every_path_that_needs_the_package_works_from_a_fresh_interpreter(tmp_path):
    db, csv = str(tmp_path / "s.duckdb"), str(tmp_path / "long.csv")
    for name, body in PATHS.items():
        code = SETUP.format(db=db) + textwrap.dedent(body).format(csv=csv)
        proc = _run(code)
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"


def test_a_report_on_a_packed_grid_never_loads_the_package(tmp_path):
    db = tmp_path / "s.duckdb"
    proc = _run(SETUP.format(db=str(db)) + "write_synthetic_grid(store, simulate(4, 60), 'g')")
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = _run(textwrap.dedent(f"""
        import sys
        from fragility_tui.cli import main
        status = main(["--db", {str(db)!r}, "report", "--grid", "g", "--json"])
        print("STATUS", status, "duckdb" in sys.modules, "_duckdb" in sys.modules)
        """))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "STATUS 0 False True"


RELATION_METHODS = {"register", "sql"}


def _imports_the_package(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name == "duckdb" for a in n.names)
               for n in ast.walk(node))


def test_relation_methods_go_through_relational():
    """`con.register(...)` or `con.sql(...)` on a store connection fails unless the package
    is loaded: such a call either wraps its connection in `relational(...)` or sits in a
    function that imports the package itself (like `duckdb.sql` on its own). Connections
    are opened in store/ only (items/rows.py reads Parquet on the package's own)."""
    offenders = []
    for path in (REPO / "fragility_tui" / "store").rglob("*.py"):
        tree = ast.parse(path.read_text())
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for function in functions:
            if _imports_the_package(function):
                continue
            for call in ast.walk(function):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr in RELATION_METHODS):
                    continue
                receiver = call.func.value
                wrapped = (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name)
                           and receiver.func.id == "relational")
                if not wrapped:
                    offenders.append(f"{path.relative_to(REPO)}:{call.lineno}")
    assert not offenders, offenders
