"""SPEC §7 axis ablation: how much of each model's reference-correct set survives an axis."""

from __future__ import annotations

import numpy as np

from fragility_tui.grid.cube import Cube
from fragility_tui.grid.configs import CONFIG_BY_ID, REFERENCE

AXES = ("order", "format", "scoring", "all")


def _in_neighbourhood(axis: str, config_id: str) -> bool:
    cfg = CONFIG_BY_ID[config_id]
    if axis == "order":
        return cfg.format == "letter" and cfg.scoring == "generate"
    if axis == "format":
        return cfg.order == "o0" and cfg.scoring == "generate"
    if axis == "scoring":
        return config_id == REFERENCE or cfg.scoring == "likelihood"
    return True  # "all": every config in view


def neighbourhoods(cube: Cube) -> dict[str, np.ndarray]:
    """Config indices of each axis neighbourhood, intersected with the view (§11)."""
    return {axis: np.array([k for k, c in enumerate(cube.configs) if _in_neighbourhood(axis, c)],
                           dtype=np.intp) for axis in AXES}


def preserved_fractions(cube: Cube) -> dict[str, np.ndarray]:
    """{axis: [M] preserved fraction}, NaN when the axis holds only the reference or the
    model has no reference-correct item complete over the whole view (§11)."""
    ref = cube.reference_index
    complete = cube.present.all(axis=2)
    ref_correct = cube.bits[:, :, ref] & complete
    denom = np.count_nonzero(ref_correct, axis=1)
    out = {}
    for axis, idx in neighbourhoods(cube).items():
        if len(idx) <= 1:
            out[axis] = np.full(len(cube.models), np.nan)
            continue
        kept = np.count_nonzero(ref_correct & cube.bits[:, :, idx].all(axis=2), axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[axis] = np.where(denom > 0, kept / np.maximum(denom, 1), np.nan)
    return out
