"""Tiny hand-checkable grids for the analysis tests (imported by name: tests has no packages)."""

from __future__ import annotations

import numpy as np
from fragility_tui.grid.cube import Cube

# canonical order: o0.letter (the reference), o0.paren, o1.letter, cloze_qa
TINY_CONFIGS = ("o0.letter", "o0.paren", "o1.letter", "cloze_qa")

# one string per item, one character per config in TINY_CONFIGS order ('1' correct,
# '0' wrong, '.' missing). Items i1-i3 are benchmark b1, i4-i6 benchmark b2.
TINY = {
    "m1": ["1111", "1111", "1101", "1000", "0000", "0110"],
    "m2": ["1111", "0000", "1111", "1011", "0000", "0101"],
    "m3": ["1111", "1110", "0000", "0000", "1111", "0000"],
}
TINY_BENCHMARKS = ["b1", "b1", "b1", "b2", "b2", "b2"]


def make_cube(rows: dict[str, list[str]], benchmarks, configs=TINY_CONFIGS,
              items=None) -> Cube:
    models = tuple(rows)
    n_items = len(benchmarks)
    items = tuple(items or (f"{benchmarks[i]}/i{i + 1}" for i in range(n_items)))
    text = np.array([[list(s) for s in rows[m]] for m in models])  # [M, I, C]
    assert text.shape == (len(models), n_items, len(configs))
    return Cube(models, items, tuple(configs), text == "1", text != ".",
                np.array(benchmarks, dtype=object))


def uniform_pair(n_by_bench: dict[str, tuple[str, str]], configs=TINY_CONFIGS,
                 override: dict | None = None) -> Cube:
    """Two models A, B; per benchmark (n items, pattern) where pattern is 'A'/'B'/'='/'0'
    (only A right, only B right, both right, both wrong) for every item and config.
    override: {(benchmark, config): pattern} or {(benchmark, 'B-missing'): True}."""
    override = override or {}
    rows = {"A": [], "B": []}
    benchmarks = []
    for bench, (n, pattern) in n_by_bench.items():
        for _ in range(n):
            a_cells, b_cells = "", ""
            for config in configs:
                p = override.get((bench, config), pattern)
                a_cells += "1" if p in "A=" else "0"
                b_cells += "1" if p in "B=" else "0"
            if override.get((bench, "B-missing")):
                b_cells = "." * len(configs)
            rows["A"].append(a_cells)
            rows["B"].append(b_cells)
            benchmarks.append(bench)
    return make_cube(rows, benchmarks, configs)
