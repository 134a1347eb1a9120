"""Schema 9 (issue 58): the comparisons table, which keeps the first sequential comparison of
each (pair, reference, target) in a grid. A schema 8 store gains it in place, with its grids
and cells intact; its rows go with their grid."""

from __future__ import annotations

import duckdb

from fragility_tui.store.schema import SCHEMA_VERSION, CellRow
from fragility_tui.store.store import Store

FIRST = dict(a="m1", b="m2", reference="o0.letter", target="observed", seed=0,
             scope="population", margin=0.02, chunk=25, live=False)


def test_a_schema_8_store_gains_the_comparisons_table_and_keeps_its_cells(tmp_path):
    path = tmp_path / "s.duckdb"
    store = Store(path)
    store.create_grid("g")
    store.write_cells("g", [CellRow("m1", "toy/1", "o0.letter", True, 0)])
    con = duckdb.connect(str(path))  # what schema 8 wrote: no comparisons table
    con.execute("DROP TABLE comparisons")
    con.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION >= 9
    assert store.count_cells("g") == 1
    assert store.comparisons("g", "m1", "m2", "observed") == []
    store.record_comparison("g", **FIRST, result={"stop": "winner"})
    # another seed at the same reference keeps the first; the pair is unordered
    store.record_comparison("g", **{**FIRST, "a": "m2", "b": "m1", "seed": 5},
                            result={"stop": "budget"})
    store.record_comparison("g", **{**FIRST, "reference": "cloze_qa", "seed": 3},
                            result=None)
    rows = store.comparisons("g", "m2", "m1", "observed")
    assert [(r["reference"], r["seed"], r["a"]) for r in rows] == \
        [("o0.letter", 0, "m1"), ("cloze_qa", 3, "m1")]
    assert rows[0]["result"] == {"stop": "winner"} and rows[1]["result"] is None
    # the same comparison again (same seed) updates its verdict
    store.record_comparison("g", **FIRST, result={"stop": "equivalent"})
    assert store.comparisons("g", "m1", "m2", "observed")[0]["result"] == {"stop": "equivalent"}
    store.delete_grid("g")
    assert store.comparisons("g", "m1", "m2", "observed") == []
