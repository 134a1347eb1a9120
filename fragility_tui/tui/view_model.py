"""What the panes show, computed off the UI thread from a Cube (no textual imports here).

Everything comes from the analysis engine: the headline numbers from
`analysis.report.report_of` (typed records, analysis/report_sections.py), the drill-downs
from its building blocks (the one classification of analysis/basis.py, item fragility and
discrimination, pair sets). This module only selects and filters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from fragility_tui.analysis.basis import Basis, measure
from fragility_tui.analysis.classify import FRAGILE, INCOMPLETE
from fragility_tui.analysis.report_sections import Report
from fragility_tui.grid.cube import Cube
from fragility_tui.analysis.itemstats import discrimination, fragility
from fragility_tui.analysis.pairs import pair_sets
from fragility_tui.items.item import Item
from fragility_tui.tui.selection import Selection


@dataclass
class GridView:
    """One grid under one selection: everything a pane needs, computed once."""

    grid: str
    synthetic: bool
    seed: int
    full: Cube
    cube: Cube  # the selection applied
    items: dict[str, Item]
    report: Report
    basis: Basis  # the view's accuracy and classification, measured once
    fragility: np.ndarray  # float [I], NaN where undefined
    discrimination: np.ndarray  # float [I], NaN where undefined
    selection: Selection = field(default_factory=Selection)
    item_table: list = field(default_factory=list)  # per item: (uid, Items-pane row values)
    truth: dict | None = None  # a synthetic grid's true parameters (grid metadata "truth")

    @property
    def partial(self) -> bool:
        """Only the report's first sections so far (a big grid: the rest is on its way)."""
        return self.report.partial

    @property
    def classification(self):
        """analysis.classify.Classification over the view, in the view cube's order."""
        return self.basis.source_classification

    @property
    def classes(self) -> np.ndarray:
        """int8 [M, I] classification codes (analysis.classify constants)."""
        return self.classification.codes


def build_view(grid: str, synthetic: bool, seed: int, full: Cube, items: dict[str, Item],
               selection: Selection, *, first: bool = False, truth: dict | None = None,
               basis: Basis | None = None) -> GridView:
    """The slow part of a selection change: runs in a worker thread. `first`: only the
    report's first sections (bands, configs: no bootstrap), for a big grid's first frame.
    basis: the first view's, when this builds the rest of the same view (measured once)."""
    from fragility_tui.analysis.report import first_sections, report_of  # heavy: lazily

    # the selection's reference, else the one `report` uses by default (grid/reference.py):
    # o0.letter when the grid has it, else its first config in canonical order
    full = selection.measured(full)
    basis = basis if basis is not None else measure(selection.apply(full))
    cube = basis.source
    report = first_sections(basis, name=grid) if first else report_of(basis, seed=seed, name=grid)
    cls = basis.source_classification
    view = GridView(grid, synthetic, seed, full, cube, items, report, basis,
                    fragility(cube, cls), discrimination(cube), selection, truth=truth)
    view.item_table = item_table(view)  # built here so the Items pane only shows rows
    return view


def item_table(view: GridView) -> list[tuple[str, list]]:
    """One row per item (tui.item_table.ITEM_COLUMNS): id, fragility, benchmark, subject,
    discrimination, number of fragile and of incomplete models, question."""
    cube = view.cube
    n_fragile = (view.classes == FRAGILE).sum(axis=0).tolist()
    n_incomplete = (view.classes == INCOMPLETE).sum(axis=0).tolist()
    subjects = [None] * len(cube.items) if cube.subjects is None else cube.subjects.tolist()
    rows = []
    for k, uid in enumerate(cube.items):
        item = view.items.get(uid)
        rows.append((uid, [uid, float(view.fragility[k]), cube.benchmarks[k], subjects[k],
                           float(view.discrimination[k]), n_fragile[k], n_incomplete[k],
                           item.question if item else ""]))
    return rows


PAIR_PARTS = {
    "a_only_stable": "stable: A only",  # A robust-correct, B robust-wrong
    "b_only_stable": "stable: B only",  # B robust-correct, A robust-wrong
    "fragile_disagreements": "fragile split",  # reference disagreement outside the stable set
    "incomplete_disagreements": "incomplete split",  # ... on a row missing a cell (SPEC v3)
}


def pair_item_groups(view: "GridView", a: str, b: str) -> dict[str, np.ndarray]:
    """Item indices behind a pair's gap split (SPEC §6), keyed by a readable part name."""
    cube = view.cube
    sets = pair_sets(cube, cube.models.index(a), cube.models.index(b), view.classification)
    return {label: sets[key] for key, label in PAIR_PARTS.items()}


# ---------------------------------------------------------------- item filtering
_FILTER_TOKEN = re.compile(r"(bench|benchmark|subject|flips):(\S+)|frag(>=|<=|>|<|=)(\d*\.?\d+)(?![\d.])")


@dataclass(frozen=True)
class ItemFilter:
    """The Items pane's query: `bench:arc subject:phys frag>0.5 flips:MODEL free text`."""

    benchmark: str | None = None
    subject: str | None = None
    flips_for: str | None = None
    frag_op: str | None = None
    frag_value: float = 0.0
    text: str = ""

    @classmethod
    def parse(cls, query: str) -> "ItemFilter":
        fields: dict = {}
        for m in _FILTER_TOKEN.finditer(query):
            key, value, op, number = m.groups()
            if op:
                fields["frag_op"], fields["frag_value"] = op, float(number)
            elif key in ("bench", "benchmark"):
                fields["benchmark"] = value.lower()
            elif key == "subject":
                fields["subject"] = value.lower()
            elif key == "flips":
                fields["flips_for"] = value
        fields["text"] = _FILTER_TOKEN.sub(" ", query).strip().lower()
        return cls(**fields)


def filter_items(view: GridView, flt: ItemFilter) -> np.ndarray:
    """Indices of the view's items that match the filter, in grid order."""
    cube = view.cube
    keep = np.ones(len(cube.items), dtype=bool)
    if flt.benchmark:
        keep &= np.array([flt.benchmark in str(b).lower() for b in cube.benchmarks])
    if flt.subject and cube.subjects is not None:
        keep &= np.array([flt.subject in str(s or "").lower() for s in cube.subjects])
    if flt.flips_for:
        matches = flips_models(cube.models, flt.flips_for)
        if len(matches) != 1:  # none, or ambiguous: filter_problems says which
            return np.array([], dtype=np.intp)
        keep &= view.classes[matches[0]] == FRAGILE
    if flt.frag_op:
        f = view.fragility
        ops = {">": f > flt.frag_value, ">=": f >= flt.frag_value, "<": f < flt.frag_value,
               "<=": f <= flt.frag_value, "=": np.isclose(f, flt.frag_value)}
        keep &= ops[flt.frag_op]  # NaN (undefined fragility) compares False: left out
    idx = np.flatnonzero(keep)
    if flt.text:
        idx = np.array([k for k in idx if _item_matches(view, cube.items[k], flt.text)],
                       dtype=np.intp)
    return idx


def flips_models(models, name: str) -> list[int]:
    """The model `flips:NAME` means: the one of that exact name, else those containing it."""
    return [k for k, m in enumerate(models) if m == name] or \
        [k for k, m in enumerate(models) if name.lower() in m.lower()]


_FRAG_WORD = re.compile(r"(?<!\S)frag\S*")


def filter_problems(models, query: str) -> list[str]:
    """What in an items query cannot work, said instead of an empty table: a flips:NAME that
    names no model or several, a frag condition without a number."""
    problems = []
    flt = ItemFilter.parse(query)
    if flt.flips_for:
        matches = flips_models(models, flt.flips_for)
        if not matches:
            problems.append(f"flips:{flt.flips_for} names no model ({', '.join(models)})")
        elif len(matches) > 1:
            problems.append(f"flips:{flt.flips_for} matches {len(matches)} models ("
                            + ", ".join(models[k] for k in matches) + "): type more of one")
    for word in _FRAG_WORD.findall(_FILTER_TOKEN.sub(" ", query)):
        problems.append(f"{word!r} is not a fragility condition: frag>0.5, frag<=0.2, frag=0")
    return problems


def _item_matches(view: GridView, uid: str, needle: str) -> bool:
    item = view.items.get(uid)
    if needle in uid.lower():
        return True
    if item is None:
        return False
    return needle in item.question.lower() or any(needle in c.lower() for c in item.choices)
