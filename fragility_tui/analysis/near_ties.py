"""Fragility that rounding alone can explain (docs/runner.md, *Margins and near-ties*).

A (model, item) row is config-fragile when its complete cells in view disagree. It is
fragile *only through near-tie cells* when the cells that are not near-ties all agree (or
there are none): every disagreement involves a cell whose decision sat inside the run's
rounding tolerance, so the row's fragility is not evidence about the harness. Pure numpy
on the cube plus a near-tie mask aligned with it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.analysis.classify import FRAGILE, classify
from fragility_tui.grid.cube import Cube


@dataclass(frozen=True)
class NearTieFragility:
    model: str
    fragile: int  # config-fragile complete rows
    only_near_ties: int  # of which fragile only through near-tie cells
    near_tie_cells: int  # near-tie cells of the model in view


def near_tie_fragility(cube: Cube, near_tie: np.ndarray) -> list[NearTieFragility]:
    """Per model of `cube`; `near_tie` is bool [M, I, C] aligned with cube (False where a
    cell is missing or has no margin)."""
    if near_tie.shape != cube.bits.shape:
        raise ValueError(f"near-tie mask {near_tie.shape} does not match the cube "
                         f"{cube.bits.shape}")
    fragile = classify(cube).codes == FRAGILE
    decided = cube.present & ~near_tie  # cells whose decision is outside rounding
    all_right = np.where(decided, cube.bits, True).all(axis=2)
    all_wrong = np.where(decided, ~cube.bits, True).all(axis=2)
    only = fragile & (all_right | all_wrong)
    near = near_tie & cube.present
    return [NearTieFragility(model, int(fragile[m].sum()), int(only[m].sum()),
                             int(near[m].sum()))
            for m, model in enumerate(cube.models)]
