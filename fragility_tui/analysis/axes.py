"""SPEC §7 axis ablation: how much of each model's reference-correct set survives an axis."""

from __future__ import annotations

import numpy as np

from fragility_tui.analysis.classify import Classification
from fragility_tui.grid.cube import Cube
from fragility_tui.harness.configs import CONFIG_BY_ID, REFERENCE

AXES = ("order", "format", "scoring", "all")


_SCORING_TRIO = (REFERENCE, "cloze_qa", "cloze_bare")  # SPEC §7's scoring neighbourhood


def _in_neighbourhood(axis: str, config_id: str, reference: str = REFERENCE) -> bool:
    """SPEC §7's neighbourhoods of o0.letter, read relative to any reference: order = the
    reference's format and scoring in every order; format = the reference's order and
    scoring in every format (for a cloze reference: both cloze formats); scoring = the
    reference plus the configs of SPEC's trio (o0.letter, cloze_qa, cloze_bare) scored
    the other way. For o0.letter these are exactly SPEC's three sets."""
    cfg, ref = CONFIG_BY_ID[config_id], CONFIG_BY_ID[reference]
    if axis == "order":
        return cfg.format == ref.format and cfg.scoring == ref.scoring
    if axis == "format":
        return cfg.order == ref.order and cfg.scoring == ref.scoring
    if axis == "scoring":
        return config_id == reference or (config_id in _SCORING_TRIO
                                          and cfg.scoring != ref.scoring)
    return True  # "all": every config in view


def neighbourhoods(cube: Cube) -> dict[str, np.ndarray]:
    """Config indices of each axis neighbourhood, intersected with the view (§11)."""
    return {axis: np.array([k for k, c in enumerate(cube.configs)
                            if _in_neighbourhood(axis, c, cube.reference)], dtype=np.intp)
            for axis in AXES}


def preserved_fractions(cube: Cube, cls: Classification | None = None) -> dict[str, np.ndarray]:
    """{axis: [M] preserved fraction}, NaN when the axis holds only the reference or the
    model has no reference-correct item complete over the whole view (§11). cls: the
    cube's classification when the caller has it (its rows' completeness is reused)."""
    ref = cube.reference_index
    complete = cls.complete if cls is not None else cube.present.all(axis=2)
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
