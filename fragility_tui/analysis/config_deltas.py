"""A pair's Δ̂ at every config in view, each with its 95% percentile interval (the Compare
pane's plot). The same estimator and stratified paired bootstrap as the decisions
(analysis/decisions.py, SPEC §9), one bootstrap column per config; the decision itself
(label, flags) stays at the reference config."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.analysis.decisions import (bootstrap_counts, canonical, percentile_ci,
                                              point_counts, strata_of, target_estimates)
from fragility_tui.grid.cube import Cube


@dataclass(frozen=True)
class ConfigDelta:
    config: str
    delta: float | None  # accuracy fraction, A − B
    ci: tuple[float, float] | None


def config_deltas(cube: Cube, a: str, b: str, *, target: str = "observed", seed: int = 0,
                  n_boot: int = 2000) -> list[ConfigDelta]:
    """Δ̂(A − B) under `target` at each config of the cube, in its order."""
    cube = canonical(cube)
    ia, ib = cube.models.index(a), cube.models.index(b)
    strata = strata_of(cube)
    num, den = point_counts(cube, strata, np.array([ia]), np.array([ib]))  # [1, S, C]
    supported = den > 0
    point = target_estimates(num.transpose(1, 0, 2), den.transpose(1, 0, 2),
                             supported.transpose(1, 0, 2))[target][0]  # [C]
    n_configs = len(cube.configs)
    cols = np.array([(ia, ib, c) for c in range(n_configs)], dtype=np.intp)
    bnum, bden = bootstrap_counts(cube, strata, cols, n_boot, seed)  # [S, B, C]
    samples = target_estimates(bnum, bden, supported[0][:, None, :])[target]  # [B, C]
    lo, hi = percentile_ci(samples)
    out = []
    for c, config in enumerate(cube.configs):
        delta = float(point[c]) if np.isfinite(point[c]) else None
        ci = (float(lo[c]), float(hi[c])) if np.isfinite(lo[c]) and np.isfinite(hi[c]) else None
        out.append(ConfigDelta(config, delta, ci))
    return out
