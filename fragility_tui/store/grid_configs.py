"""A grid's configs as data (SPEC v5 §2b): the axes stated for its configs, read and written
inside the caller's transaction, and the grid's config list in canonical order.

A runner config's id states its axes (harness/config_axes.py); a row here holds what an
import read from a log or a long-format file: axes that override or add to the id's."""

from __future__ import annotations

import json

from fragility_tui.errors import InputError
from fragility_tui.harness.config_axes import canonical_order


def stated_axes(con, grid: str) -> dict[str, dict[str, str]]:
    """{config_id: axes} stored for the grid (configs without a row are absent)."""
    rows = con.execute("SELECT config_id, axes FROM grid_configs WHERE grid = ?",
                       [grid]).fetchall()
    return {cid: json.loads(axes) for cid, axes in rows}


def config_sources(con, grid: str) -> dict[str, str]:
    """{config_id: where its axes were read from} (a log's path, a sidecar's)."""
    rows = con.execute("SELECT config_id, source FROM grid_configs WHERE grid = ?",
                       [grid]).fetchall()
    return {cid: source for cid, source in rows if source}


def declare_axes(con, grid: str, axes_by_config: dict[str, dict], source: str | None = None,
                 *, replace: bool = False) -> None:
    """Store the axes of these configs of the grid. A config already declared with other
    axes is refused unless `replace` (an import must not silently redefine a config whose
    cells another import wrote)."""
    if not axes_by_config:
        return
    known = stated_axes(con, grid)
    for cid, axes in axes_by_config.items():
        axes = {str(k): str(v) for k, v in axes.items()}
        if cid in known and known[cid] != axes and not replace:
            raise InputError(f"config {cid!r} of grid {grid!r} already has axes "
                             f"{json.dumps(known[cid], sort_keys=True)}, not "
                             f"{json.dumps(axes, sort_keys=True)} (--replace to redefine it)")
        con.execute("INSERT OR REPLACE INTO grid_configs VALUES (?, ?, ?, ?)",
                    [grid, cid, json.dumps(axes, sort_keys=True), source])


def grid_config_ids(con, grid: str) -> list[str]:
    """The configs the grid has cells for, in canonical order."""
    return canonical_order(r[0] for r in con.execute(
        "SELECT DISTINCT config_id FROM cells WHERE grid = ?", [grid]).fetchall())


# A relation of (config_id, position) for the grid's configs, joined where SQL needs the
# canonical order ($configs: the list from grid_config_ids).
POSITIONS_SQL = ("(SELECT unnest($configs) AS config_id, "
                 "unnest(range(len($configs))) AS position)")
