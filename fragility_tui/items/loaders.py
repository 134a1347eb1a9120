"""Item loaders (SPEC §1): a spec is a file, a folder (every item file directly in it) or a
named hub source (`items/sources.py`); its items go through four-option assembly
(`items.assemble_all`) and seeded sampling. Reading files is `item_formats.py`'s (rows and
field checks: `item_rows.py`). docs/items.md documents formats, detection, ids and exclusion
reasons.
"""

from __future__ import annotations

import os
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.items import sources
from fragility_tui.items.formats import check_unique, read_file, read_folder
from fragility_tui.items.rows import LETTERS
from fragility_tui.items.item import Item, LoadReport, RawItem, assemble_all, sample

__all__ = ["LETTERS", "load_items", "load_many", "read_file", "read_spec"]


def read_spec(spec: str | os.PathLike, *, fmt: str | None = None,
              benchmark: str | None = None) -> tuple[list[RawItem], LoadReport]:
    """A file, a folder, or a named source (when no such path exists)."""
    path = Path(spec)
    if path.is_dir():
        return read_folder(path, fmt=fmt, benchmark=benchmark)
    if path.is_file():
        return read_file(path, fmt=fmt, benchmark=benchmark)
    if sources.is_named_source(str(spec)):
        return sources.read_source(str(spec))
    raise InputError(f"no such file, folder or named source ({', '.join(sources.SOURCE_NAMES)}, "
                     "optionally with :split)", path=str(spec))


# ---------------------------------------------------------------- public entry points


def load_items(spec: str | os.PathLike, *, per_benchmark: int | None = None, seed: int = 0,
               benchmark: str | None = None, fmt: str | None = None) -> tuple[list[Item], LoadReport]:
    """Four-option items from one spec, optionally sampled (up to `per_benchmark` per
    benchmark, seeded), and the report of what was kept and excluded."""
    return load_many([spec], per_benchmark=per_benchmark, seed=seed, benchmark=benchmark, fmt=fmt)


def load_many(specs: list[str | os.PathLike], *, per_benchmark: int | None = None, seed: int = 0,
              benchmark: str | None = None, fmt: str | None = None) -> tuple[list[Item], LoadReport]:
    """The union of several specs (in order); sampling applies per benchmark over the union.
    The same item id in two specs is an error."""
    if not specs:
        raise InputError("no item files given", field="items")
    if per_benchmark is not None and (isinstance(per_benchmark, bool) or per_benchmark < 1):
        raise InputError(f"per-benchmark sample size must be at least 1, got {per_benchmark}",
                         field="per_benchmark")
    seen: dict[str, str] = {}
    items: list[Item] = []
    report: LoadReport | None = None
    for spec in specs:
        raws, part = read_spec(spec, fmt=fmt, benchmark=benchmark)
        check_unique(raws, seen)
        items += assemble_all(raws, part)
        report = part if report is None else report.merge(part)
    if not items:
        raise InputError(f"no usable items: {report.summary()}", path=report.source)
    if per_benchmark is not None:
        items = sample(items, per_benchmark, seed)
        report.selected = len(items)
    return items, report
