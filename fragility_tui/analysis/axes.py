"""SPEC §7 axis ablation: how much of each model's reference-correct set survives an axis.

Neighbourhoods come from the configs' axes (SPEC v5 §2b), not their ids: the neighbourhood
of axis X is the reference plus every config in view that agrees with it on every other
axis. On the paper set this is v4's order / format / scoring exactly.
"""

from __future__ import annotations

import numpy as np

from fragility_tui.analysis.classify import Classification
from fragility_tui.grid.cube import Cube
from fragility_tui.harness.config_axes import axes_in_view, axis_neighbourhood

AXES = ("order", "format", "scoring", "all")  # reported always (null when only the reference)

# Axes whose levels name something inside one harness (its task, its metric, its prompt
# template): they cannot agree across harnesses, so the harness axis lets them vary with it
# (docs/spec.md, "The harness axis"). Without this the harness neighbourhood of any two
# harnesses' logs would hold the reference alone.
NESTED = {"harness": frozenset({"task", "metric", "template", "stem"})}


def _in_neighbourhood(axis: str, axes: dict, reference_axes: dict) -> bool:
    nested = NESTED.get(axis)
    if nested and axes.get(axis) != reference_axes.get(axis):  # nested axes vary with it
        def strip(a):
            return {k: v for k, v in a.items() if k not in nested}
        return axis_neighbourhood(axis, strip(reference_axes), strip(axes))
    return axis_neighbourhood(axis, reference_axes, axes)


def neighbourhoods(cube: Cube) -> dict[str, np.ndarray]:
    """Config indices of each axis neighbourhood (the ones always reported, then every other
    axis the configs in view carry, §7's order), intersected with the view (§11)."""
    ref_axes = cube.axes(cube.reference)
    all_axes = [cube.axes(c) for c in cube.configs]
    others = [a for a in axes_in_view(all_axes) if a not in AXES]
    out = {}
    for axis in [*AXES[:-1], *others]:
        out[axis] = np.array([k for k, (c, axes) in enumerate(zip(cube.configs, all_axes))
                              if c == cube.reference
                              or _in_neighbourhood(axis, axes, ref_axes)], dtype=np.intp)
    out["all"] = np.arange(len(cube.configs), dtype=np.intp)
    return out


def reported_axes(cube: Cube, neighbourhood: dict[str, np.ndarray] | None = None) -> list[str]:
    """The axes a report lists (§7): order, format, scoring, all, then every other axis whose
    neighbourhood holds a config besides the reference, in §7's order."""
    neighbourhood = neighbourhood if neighbourhood is not None else neighbourhoods(cube)
    return list(AXES) + [a for a, idx in neighbourhood.items()
                         if a not in AXES and len(idx) > 1]


def preserved_fractions(cube: Cube, cls: Classification | None = None) -> dict[str, np.ndarray]:
    """{axis: [M] preserved fraction} for the reported axes, NaN when the axis holds only the
    reference or the model has no reference-correct item complete over the whole view
    (§11). cls: the cube's classification when the caller has it (its rows' completeness is
    reused)."""
    ref = cube.reference_index
    complete = cls.complete if cls is not None else cube.present.all(axis=2)
    ref_correct = cube.bits[:, :, ref] & complete
    denom = np.count_nonzero(ref_correct, axis=1)
    hoods = neighbourhoods(cube)
    out = {}
    for axis in reported_axes(cube, hoods):
        idx = hoods[axis]
        if len(idx) <= 1:
            out[axis] = np.full(len(cube.models), np.nan)
            continue
        kept = np.count_nonzero(ref_correct & cube.bits[:, :, idx].all(axis=2), axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[axis] = np.where(denom > 0, kept / np.maximum(denom, 1), np.nan)
    return out
