"""A cube in canonical order (models by name, items by benchmark then item_uid), so results do
not depend on the order a store returned rows in: the decisions, the calibration and the
report's basis all measure on it."""

from __future__ import annotations

import numpy as np

from fragility_tui.grid.cube import Cube


def canonical_order(cube: Cube) -> tuple[np.ndarray, np.ndarray] | None:
    """Model and item indices that sort models by name and items by (benchmark, item_uid);
    None when the cube is already in that order."""
    item_keys = list(zip(map(str, cube.benchmarks), cube.items))
    if _ascending(cube.models) and _ascending(item_keys):  # the usual case: one pass
        return None
    m_idx = np.array(sorted(range(len(cube.models)), key=cube.models.__getitem__), dtype=np.intp)
    i_idx = np.array(sorted(range(len(item_keys)), key=item_keys.__getitem__), dtype=np.intp)
    if (m_idx == np.arange(len(m_idx))).all() and (i_idx == np.arange(len(i_idx))).all():
        return None  # ties in order (names repeated): sorting keeps them where they are
    return m_idx, i_idx


def _ascending(keys) -> bool:
    return all(a <= b for a, b in zip(keys, keys[1:]))


def canonical(cube: Cube) -> Cube:
    """The same cube with models sorted by name and items by (benchmark, item_uid)."""
    order = canonical_order(cube)
    return cube if order is None else reordered(cube, *order)


def reordered(cube: Cube, models: np.ndarray, items: np.ndarray) -> Cube:
    """The cube with models and items taken in the given index order."""
    grid = np.ix_(models, items, np.arange(len(cube.configs)))
    return Cube(tuple(cube.models[k] for k in models), tuple(cube.items[k] for k in items),
                cube.configs, cube.bits[grid], cube.present[grid], cube.benchmarks[items],
                None if cube.subjects is None else cube.subjects[items], cube.reference,
                None if cube.near_tie is None else cube.near_tie[grid], cube.stated_axes)
