"""What every section of the report reads first, computed once per cube: per-config
accuracy (SPEC §11) and the classification of every (model, item) (SPEC §4).

The report measures a cube in canonical order (models by name, items by benchmark then
uid), while the app shows the cube in the grid's own item order. `measure` classifies the
cube as given once and reorders the result for the canonical copy, so the report's sections
and the app's panes read one classification instead of computing their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from fragility_tui.analysis.classify import (Classification, ConfigAccuracy, classify,
                                             config_accuracy)
from fragility_tui.grid.canonical import canonical_order, reordered
from fragility_tui.grid.cube import Cube


@dataclass(frozen=True, eq=False)
class Basis:
    """A cube measured once: `cube` in canonical order with its accuracy and
    classification, and `source` (the cube as given) with its classification."""

    cube: Cube
    accuracy: ConfigAccuracy
    classification: Classification
    source: Cube
    source_classification: Classification


def measure(cube: Cube) -> Basis:
    """The cube's basis; raises ReferenceNotInView (grid/reference.py) when the reference
    is not in view, since every section is measured against it."""
    cube.reference_index  # noqa: B018 - the one reference-in-view check, before any work
    acc, cls = config_accuracy(cube), classify(cube)
    order = canonical_order(cube)
    if order is None:
        return Basis(cube, acc, cls, cube, cls)
    models, items = order
    return Basis(reordered(cube, models, items), acc.reordered(models),
                 cls.reordered(models, items), cube, cls)
