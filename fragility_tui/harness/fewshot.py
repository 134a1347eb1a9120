"""Few-shot examples of the `+kN` modifier (SPEC v5 §2): N solved items of the same
benchmark before the question, drawn per item by the grid seed from the benchmark's other
items in the pool, never the item itself.

The draw ranks the candidates by sha256(seed, item, candidate) and takes the first N, in
that order: reproducible from the seed and the two uids alone (no RNG state, no Python or
numpy version), and the same for every config of the item, so the configs of one format
share the examples' prefix. A cell records the uids it was shown (cells.examples), so it
re-renders exactly even if the pool grows later.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from fragility_tui.items.item import Item


def _rank(seed: int, item_uid: str, candidate_uid: str) -> bytes:
    return hashlib.sha256(f"{seed}\x1ffewshot\x1f{item_uid}\x1f{candidate_uid}".encode()).digest()


def pools_by_benchmark(items: Iterable[Item]) -> dict[str, list[Item]]:
    """The pool a run draws from: its items grouped by benchmark."""
    pools: dict[str, list[Item]] = {}
    for item in items:
        pools.setdefault(item.benchmark, []).append(item)
    return pools


def draw_examples(item: Item, pools: Mapping[str, list[Item]], n: int,
                  seed: int) -> tuple[Item, ...]:
    """The item's `n` examples (ValueError when its benchmark has fewer other items)."""
    if n <= 0:
        return ()
    others = [c for c in pools.get(item.benchmark, ()) if c.item_uid != item.item_uid]
    if len(others) < n:
        raise ValueError(f"+k{n}: benchmark {item.benchmark!r} has {len(others)} other "
                         f"item(s) in the run's pool, fewer than {n}")
    return tuple(sorted(others, key=lambda c: _rank(seed, item.item_uid, c.item_uid))[:n])


def short_benchmarks(items: Iterable[Item], n: int) -> dict[str, int]:
    """Benchmarks whose pool cannot give each item `n` examples: name -> its size."""
    return {name: len(pool) for name, pool in pools_by_benchmark(items).items()
            if len(pool) - 1 < n}
