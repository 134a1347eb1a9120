"""SPEC §9 pairwise decisions: Δ̂ under a target, a stratified paired bootstrap, and flags.

Engine shape (speed): the bootstrap is one set of per-benchmark resampling count matrices
W[b] (resamples x items), drawn once and applied to every (pair, config) column by a float32
matmul (paired_bootstrap.py). Only the columns a flag
can need are bootstrapped: the decision's own config and the other configs whose point
estimate already reverses the winner by at least the margin (no other config can make a
decision harness-sensitive). §9 v3 judges those with a band over *all* the other configs;
a band over the reversing ones alone is narrower, so when no reversing config clears even
that band the decision is settled, and only the pairs where one does get the rest of the
family bootstrapped (on the same resamples): exact, and most decisions never need it.

Everything runs on the cube put into canonical order (models by name, items by benchmark
then item_uid) so results do not depend on the order a store returned rows in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fragility_tui.analysis.classify import Classification, classify
from fragility_tui.analysis.decision_words import MIN_BALANCED_ITEMS
from fragility_tui.grid.canonical import canonical, canonical_order, reordered  # noqa: F401
from fragility_tui.grid.cube import Cube
from fragility_tui.analysis.paired_bootstrap import (Resamples, Strata,  # noqa: F401
                                                     bootstrap_counts, complete_estimates,
                                                     point_counts, strata_of, target_estimates)
from fragility_tui.analysis.harness_family import (LEVEL, TOL, opposite_winners, reversing,
                                                   sign, simultaneous_intervals)
from fragility_tui.analysis.pairs import mcnemar_exact_p

__all__ = ["TOL", "LEVEL", "simultaneous_intervals", "decide", "decide_pairs"]

TARGETS = ("observed", "balanced")
FLAGS = ("unsupported", "harness-sensitive", "underpowered", "target-sensitive")
# SPEC §9 v4: under the balanced target every benchmark weighs the same, so a benchmark of a
# handful of paired items would carry a full benchmark's weight that its bootstrap cannot
# measure: below MIN_BALANCED_ITEMS the balanced target is unsupported.
_COLS_PER_BLOCK = 256  # bootstrapped columns per block (temporaries of ~8 MB per benchmark)


def percentile_ci(samples: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Per column [B, K] -> (lo[K], hi[K]); NaN resamples dropped; NaN if none is left."""
    tail = (1 - level) / 2 * 100
    lo = np.full(samples.shape[1:], np.nan)
    hi = np.full(samples.shape[1:], np.nan)
    finite = np.isfinite(samples)
    full = finite.all(axis=0)
    if full.any():  # the common case, vectorised; nanpercentile is a slow per-column loop
        lo[full], hi[full] = np.percentile(samples[:, full], [tail, 100 - tail], axis=0)
    partial = finite.any(axis=0) & ~full
    if partial.any():
        lo[partial], hi[partial] = np.nanpercentile(samples[:, partial], [tail, 100 - tail], axis=0)
    return lo, hi


@dataclass(frozen=True)
class BenchmarkDelta:
    benchmark: str
    n_items: int
    delta: float | None
    ci: tuple[float, float] | None

    def to_json(self) -> dict:
        return {"benchmark": self.benchmark, "n_items": self.n_items, "delta": self.delta,
                "ci": None if self.ci is None else list(self.ci)}


@dataclass(frozen=True)
class Decision:
    """One (pair, config, target) decision. Δ̂ and intervals are accuracy fractions;
    margin is in points (SPEC's m)."""

    a: str
    b: str
    config: str
    target: str
    delta: float | None
    ci: tuple[float, float] | None
    label: str
    flags: tuple[str, ...]
    margin: float
    n_items: int  # paired items at the config, over supported benchmarks
    other_target_delta: float | None
    movement_ci: tuple[float, float] | None  # of Δ̂(other target) − Δ̂(this target)
    harness_configs: tuple[str, ...]  # configs supporting the opposite winner
    unsupported_benchmarks: tuple[str, ...]
    mcnemar_a_only: int  # on the jointly robust items (configs in view)
    mcnemar_b_only: int
    mcnemar_p: float
    per_benchmark: tuple[BenchmarkDelta, ...]
    simultaneous_ci: tuple[float, float] | None = None
    adjacent: bool = False

    def to_json(self) -> dict:
        pair = lambda t: None if t is None else [t[0], t[1]]  # noqa: E731
        return {
            "a": self.a, "b": self.b, "config": self.config, "target": self.target,
            "delta": self.delta, "ci": pair(self.ci), "label": self.label,
            "flags": list(self.flags), "margin_points": self.margin, "n_items": self.n_items,
            "other_target_delta": self.other_target_delta, "movement_ci": pair(self.movement_ci),
            "harness_configs": list(self.harness_configs),
            "unsupported_benchmarks": list(self.unsupported_benchmarks),
            "mcnemar": {"a_only": self.mcnemar_a_only, "b_only": self.mcnemar_b_only,
                        "p": self.mcnemar_p},
            "per_benchmark": [x.to_json() for x in self.per_benchmark],
            "simultaneous_ci": pair(self.simultaneous_ci), "adjacent": self.adjacent,
        }


def _f(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def _interval(lo, hi) -> tuple[float, float] | None:
    return (float(lo), float(hi)) if np.isfinite(lo) and np.isfinite(hi) else None


@dataclass
class _Plan:
    """Which (pair, config) columns the bootstrap needs, and where each lands."""

    cols: list[tuple[int, int, int]] = field(default_factory=list)
    where: dict[tuple[int, int], int] = field(default_factory=dict)  # (pair, config) -> col

    def need(self, p: int, a: int, b: int, c: int) -> None:
        if (p, c) not in self.where:
            self.where[(p, c)] = len(self.cols)
            self.cols.append((a, b, c))


def decide_pairs(cube: Cube, pairs, *, config: str | None = None, margin: float = 2.0,
                 seed: int = 0, n_boot: int = 2000, adjacent=None,
                 cls: Classification | None = None) -> list[Decision]:
    """Decisions for pairs [(a_name, b_name)], both targets each (pair-major, observed
    first). adjacent: optional per-pair flags; adjacent pairs also get simultaneous
    (max-deviation) intervals over their family, per target. cls: the classification of
    the cube when the caller already has it (it must be canonical then). config: default
    the cube's reference."""
    config = cube.reference if config is None else config
    canon = canonical(cube)
    cls = cls if canon is cube and cls is not None else None
    cube = canon
    if config not in cube.configs:
        raise ValueError(f"config {config!r} is not in view")
    pairs = list(pairs)
    if not pairs:
        return []
    a_idx, b_idx = _pair_indices(cube, pairs)
    adjacent = list(adjacent) if adjacent is not None else [False] * len(pairs)
    c0 = cube.configs.index(config)
    m = margin / 100.0
    strata = strata_of(cube)
    num, den = point_counts(cube, strata, a_idx, b_idx)  # [P, S, C]
    supported = den > 0
    point = target_estimates(num.transpose(1, 0, 2), den.transpose(1, 0, 2),
                             supported.transpose(1, 0, 2))  # {t: [P, C]}
    plan = _plan_columns(point, a_idx, b_idx, c0, m)
    resamples = Resamples(strata, n_boot, seed)
    boot = _bootstrap(cube, strata, plan, supported, resamples, c0)
    first = len(plan.cols)
    widened = set(_widen(plan, boot.samples, point, a_idx, b_idx, c0, m))
    boot = _extend(boot, cube, strata, plan, first, supported, resamples)
    del resamples  # the counts: n_boot x items float32, not needed past here

    cls = cls if cls is not None else classify(cube)
    a_only = np.count_nonzero(cls.robust_correct[a_idx] & cls.robust_wrong[b_idx], axis=1)
    b_only = np.count_nonzero(cls.robust_wrong[a_idx] & cls.robust_correct[b_idx], axis=1)
    mc_p = mcnemar_exact_p(a_only, b_only)
    simult = _simultaneous(plan, boot.samples, point, adjacent, c0)

    out = []
    for p, (a, b) in enumerate(pairs):
        k0 = plan.where[(p, c0)]
        unsupported = tuple(strata.names[s] for s in np.flatnonzero(~supported[p, :, c0]))
        small = tuple(strata.names[s] for s in np.flatnonzero(
            supported[p, :, c0] & (den[p, :, c0] < MIN_BALANCED_ITEMS)))
        balanced_ok = not unsupported and not small and np.isfinite(point["balanced"][p, c0])
        per_bench = tuple(
            BenchmarkDelta(name, int(den[p, s, c0]),
                           _f(num[p, s, c0] / den[p, s, c0]) if den[p, s, c0] else None,
                           _interval(boot.bench_ci[s][0][k0], boot.bench_ci[s][1][k0]))
            for s, name in enumerate(strata.names))
        for t in TARGETS:
            other = TARGETS[1 - TARGETS.index(t)]
            delta = _f(point[t][p, c0])
            other_delta = _f(point[other][p, c0])
            ci = _interval(boot.ci[t][0][k0], boot.ci[t][1][k0])
            other_ci = _interval(boot.ci[other][0][k0], boot.ci[other][1][k0])
            lacking = unsupported + (small if t == "balanced" else ())
            # the movement is other − this: balanced − observed, negated for balanced
            lo, hi = boot.move_ci[0][k0], boot.move_ci[1][k0]
            move_ci = _interval(lo, hi) if t == "observed" else _interval(-hi, -lo)
            # a balanced target over a benchmark too small to bootstrap (v4) cannot judge
            # another config's band either: not judged (docs/spec.md, the map)
            harness = () if t == "balanced" and small else _harness_configs(
                plan, p, c0, delta, point[t], boot.samples[t], m, cube.configs, p in widened)
            flags = _flags(delta, ci, bool(lacking), bool(harness),
                           (other_delta, other_ci, move_ci) if balanced_ok else None, m)
            out.append(Decision(
                a=a, b=b, config=config, target=t, delta=delta, ci=ci,
                label=flags[0] if flags else "stable", flags=flags, margin=float(margin),
                n_items=int(den[p, :, c0].sum()), other_target_delta=other_delta,
                movement_ci=move_ci, harness_configs=harness,
                unsupported_benchmarks=lacking, mcnemar_a_only=int(a_only[p]),
                mcnemar_b_only=int(b_only[p]), mcnemar_p=float(mc_p[p]), per_benchmark=per_bench,
                simultaneous_ci=simult.get((p, t)), adjacent=bool(adjacent[p])))
    return out


def _pair_indices(cube: Cube, pairs) -> tuple[np.ndarray, np.ndarray]:
    pos = {m: k for k, m in enumerate(cube.models)}
    unknown = [m for p in pairs for m in p if m not in pos]
    if unknown:
        raise ValueError(f"unknown model(s): {', '.join(dict.fromkeys(unknown))}")
    return np.array([pos[a] for a, _ in pairs]), np.array([pos[b] for _, b in pairs])


def _plan_columns(point: dict, a_idx, b_idx, c0: int, m: float) -> _Plan:
    """The decision config of every pair, plus each other config whose point estimate
    already reverses the winner by at least m under some target: the only configs that
    can make a decision harness-sensitive, hence the first ones worth bootstrapping."""
    plan = _Plan()
    for p in range(len(a_idx)):
        plan.need(p, a_idx[p], b_idx[p], c0)
        for t in TARGETS:
            for c in reversing(point[t][p], c0, m):
                plan.need(p, a_idx[p], b_idx[p], int(c))
    return plan


def _widen(plan: _Plan, samples: dict, point: dict, a_idx, b_idx, c0: int, m: float) -> list:
    """Pairs whose reversing configs support the opposite winner even under the band over
    those configs alone (a lower bound of the full family's q, undefined resamples kept as
    −inf): only for them can the full family's band flag anything. Each gets every other
    config with a defined Δ̂ added to the plan; returns them."""
    widened = []
    n_configs = point["observed"].shape[1]
    for p in range(len(a_idx)):
        for t in TARGETS:
            cand = [c for c in reversing(point[t][p], c0, m)]
            if not cand:
                continue
            ks = [plan.where[(p, int(c))] for c in cand]
            s0 = sign(_f(point[t][p, c0]))
            if opposite_winners(samples[t][:, ks], point[t][p, cand], s0, m,
                                drop_undefined=False).any():
                widened.append(p)
                break
    for p in widened:
        for c in range(n_configs):
            if c != c0 and np.isfinite(point["observed"][p, c]):
                plan.need(p, a_idx[p], b_idx[p], c)
    return widened


@dataclass(frozen=True, eq=False)
class _Boot:
    samples: dict  # target -> [B, K] resampled Δ̂
    ci: dict  # target -> (lo[K], hi[K])
    move_ci: tuple  # (lo[K], hi[K]) of balanced − observed
    bench_ci: list  # per benchmark (lo[K], hi[K])


def _samples(cube: Cube, strata: Strata, plan: _Plan, cols: range, supported,
             resamples: Resamples, dec: np.ndarray | None = None):
    """Resampled Δ̂ {target: [B, K]} of plan columns `cols`, and the per-benchmark Δ̂
    [S, B, len(dec)] of the columns `dec` (indices into cols). Computed a block of columns
    at a time: every figure is per column, so the blocks only keep the temporaries small."""
    keys = list(plan.where)[cols.start:cols.stop]
    sup_cols = supported[[p for p, _ in keys], :, [c for _, c in keys]].T  # [S, K]
    cols_ = np.array(plan.cols[cols.start:cols.stop], dtype=np.intp)
    k, n_boot = len(cols_), resamples.n_boot
    dec = np.zeros(0, dtype=np.intp) if dec is None else np.asarray(dec, dtype=np.intp)
    samples = {t: np.empty((n_boot, k)) for t in TARGETS}
    bench = np.empty((len(strata.names), n_boot, len(dec)))
    for lo in range(0, k, _COLS_PER_BLOCK):
        hi = min(lo + _COLS_PER_BLOCK, k)
        bnum, bden = bootstrap_counts(cube, strata, cols_[lo:hi], n_boot, resamples.seed,
                                      resamples)
        est = (complete_estimates(bnum, strata.stops - strata.starts, sup_cols[:, None, lo:hi])
               if cube.complete else target_estimates(bnum, bden, sup_cols[:, None, lo:hi]))
        for t in TARGETS:
            samples[t][:, lo:hi] = est[t]
        mine = np.flatnonzero((dec >= lo) & (dec < hi))
        if len(mine):
            with np.errstate(invalid="ignore", divide="ignore"):
                bench[:, :, mine] = (bnum[:, :, dec[mine] - lo].astype(np.float64)
                                     / bden[:, :, dec[mine] - lo])
    return samples, bench


def _bootstrap(cube: Cube, strata: Strata, plan: _Plan, supported, resamples: Resamples,
               c0: int) -> _Boot:
    """Samples of every planned column; percentile intervals of the decision columns only
    (the other configs are judged by their simultaneous band, harness_family)."""
    dec = np.array([k for (p, c), k in plan.where.items() if c == c0], dtype=np.intp)
    samples, bench = _samples(cube, strata, plan, range(len(plan.cols)), supported,
                              resamples, dec)

    def ci(x):  # [B, len(dec)] -> (lo[K], hi[K]) filled on the decision columns
        lo, hi = np.full(len(plan.cols), np.nan), np.full(len(plan.cols), np.nan)
        lo[dec], hi[dec] = percentile_ci(x)
        return lo, hi

    return _Boot(samples, {t: ci(samples[t][:, dec]) for t in TARGETS},
                 ci(samples["balanced"][:, dec] - samples["observed"][:, dec]),
                 [ci(bench[s]) for s in range(len(strata.names))])


def _extend(boot: _Boot, cube: Cube, strata: Strata, plan: _Plan, start: int, supported,
            resamples: Resamples) -> _Boot:
    """Append the samples of plan columns added after `start`, on the same resampling
    counts (kept by `resamples`)."""
    if start == len(plan.cols):
        return boot
    more, _ = _samples(cube, strata, plan, range(start, len(plan.cols)), supported, resamples)
    samples = {t: np.concatenate([boot.samples[t], more[t]], axis=1) for t in TARGETS}
    return _Boot(samples, boot.ci, boot.move_ci, boot.bench_ci)


def _flags(delta, ci, unsupported: bool, harness: bool, other_target, m) -> tuple:
    """SPEC §9 flags in their order; the first one is the label. other_target: (Δ̂, its
    interval, the movement's interval) of the other target, None when the balanced target
    is unsupported (v4: target-sensitive is then not judged)."""
    flags = []
    if unsupported or delta is None:
        flags.append("unsupported")
    if harness:
        flags.append("harness-sensitive")
    if not _supports_winner(delta, ci) or abs(delta) < m - TOL:
        flags.append("underpowered")
    if other_target is not None and _target_sensitive(delta, *other_target, m):
        flags.append("target-sensitive")
    return tuple(flags)


def _supports_winner(delta, ci) -> bool:
    """The interval lies wholly on Δ̂'s side of zero (1e-9 tolerance). An interval that
    includes zero, and one wholly on the side opposite Δ̂ (a percentile interval can miss
    its own point estimate), both leave the winner Δ̂ names unsupported: `underpowered`,
    never `stable` (§9: stable means the winner is supported)."""
    if ci is None or delta is None:
        return False
    side = sign(delta)
    return (side > 0 and ci[0] > TOL) or (side < 0 and ci[1] < -TOL)


def _harness_configs(plan: _Plan, p: int, c0: int, delta, point_t, samples_t, m, configs,
                     widened: bool):
    """§9/§11 v3: Δ̂ ≠ 0 and another config, same target, strictly reverses the sign with
    |Δ̂_c| ≥ m and its simultaneous interval over the other configs in view (max-|t| on the
    same resamples) excluding zero. A pair not widened has been shown to have none."""
    s0 = sign(delta)
    if not s0 or not widened:
        return ()
    others = [c for c in range(len(configs)) if c != c0 and (p, c) in plan.where]
    ks = [plan.where[(p, c)] for c in others]
    hit = opposite_winners(samples_t[:, ks], point_t[p, others], s0, m)
    return tuple(configs[c] for c, h in zip(others, hit) if h)


def _target_sensitive(delta, other, other_ci, move_ci, m) -> bool:
    """§9 v4: the other target supports the opposite winner (opposite sign, |Δ̂| ≥ m, its
    interval excluding zero), or moves Δ̂ by more than m with the movement's interval
    excluding zero. A bare sign change between two estimates of a zero gap is neither."""
    if delta is None or other is None:
        return False
    if (sign(delta) * sign(other) < 0 and abs(other) >= m - TOL
            and _supports_winner(other, other_ci)):
        return True
    moved = abs(other - delta) > m + TOL
    return bool(moved and move_ci is not None and (move_ci[0] > TOL or move_ci[1] < -TOL))


def _simultaneous(plan: _Plan, boot, point, adjacent, c0) -> dict:
    members = [p for p, adj in enumerate(adjacent) if adj]
    if not members:
        return {}
    cols = [plan.where[(p, c0)] for p in members]
    out = {}
    for t in TARGETS:
        lo, hi = simultaneous_intervals(boot[t][:, cols], point[t][members, c0])
        for j, p in enumerate(members):
            out[(p, t)] = _interval(lo[j], hi[j])
    return out


def decide(cube: Cube, a: str, b: str, config: str | None = None, *, target: str = "observed",
           margin: float = 2.0, seed: int = 0, n_boot: int = 2000) -> Decision:
    """The Compare pane's decision for one pair (both targets are computed: the
    target-sensitive flag needs the other one)."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    both = decide_pairs(cube, [(a, b)], config=config, margin=margin, seed=seed, n_boot=n_boot)
    return both[TARGETS.index(target)]
