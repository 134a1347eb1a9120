"""SPEC §9 pairwise decisions: Δ̂ under a target, a stratified paired bootstrap, and flags.

Engine shape (speed): the bootstrap is one set of per-benchmark resampling count matrices
W[b] (resamples x items), drawn once and applied to every (pair, config) column by a float32
matmul (counts are exact in float32). A resample's Δ̂ is a ratio: Σ W·d / Σ W·paired, so an
item missing a cell for a pair simply weighs nothing for that pair. Only the columns a flag
can need are bootstrapped: the decision's own config, and the other configs whose point
estimate already reverses the winner by at least the margin (the only ones that can make a
decision harness-sensitive).

Everything runs on the cube put into canonical order (models by name, items by benchmark
then item_uid) so results do not depend on the order a store returned rows in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fragility_tui.analysis.classify import Classification, classify
from fragility_tui.grid.cube import Cube
from fragility_tui.analysis.itemstats import STREAM_DECISIONS, resample_counts, rng_for
from fragility_tui.analysis.pairs import mcnemar_exact_p

TARGETS = ("observed", "balanced")
FLAGS = ("unsupported", "harness-sensitive", "underpowered", "target-sensitive")
TOL = 1e-9  # §11: comparisons against zero and the margin tolerate float noise only
LEVEL = 0.95
_ROWS_PER_CHUNK = 500  # resamples per chunk; fixed so every caller draws the same W


def canonical_order(cube: Cube) -> tuple[np.ndarray, np.ndarray] | None:
    """Model and item indices that sort models by name and items by (benchmark, item_uid);
    None when the cube is already in that order."""
    m_idx = np.array(sorted(range(len(cube.models)), key=cube.models.__getitem__), dtype=np.intp)
    i_idx = np.array(sorted(range(len(cube.items)),
                            key=lambda i: (str(cube.benchmarks[i]), cube.items[i])), dtype=np.intp)
    if (m_idx == np.arange(len(m_idx))).all() and (i_idx == np.arange(len(i_idx))).all():
        return None
    return m_idx, i_idx


def canonical(cube: Cube) -> Cube:
    """The same cube with models sorted by name and items by (benchmark, item_uid)."""
    order = canonical_order(cube)
    return cube if order is None else reordered(cube, *order)


def reordered(cube: Cube, models: np.ndarray, items: np.ndarray) -> Cube:
    """The cube with models and items taken in the given index order."""
    grid = np.ix_(models, items, np.arange(len(cube.configs)))
    return Cube(tuple(cube.models[k] for k in models), tuple(cube.items[k] for k in items),
                cube.configs, cube.bits[grid], cube.present[grid], cube.benchmarks[items],
                None if cube.subjects is None else cube.subjects[items], cube.reference)


@dataclass(frozen=True, eq=False)
class Strata:
    """Benchmarks of a canonical cube as contiguous item ranges."""

    names: tuple[str, ...]
    starts: np.ndarray  # [S]
    stops: np.ndarray  # [S]


def strata_of(cube: Cube) -> Strata:
    bench = [str(b) for b in cube.benchmarks]
    starts = [i for i in range(len(bench)) if i == 0 or bench[i] != bench[i - 1]]
    stops = starts[1:] + [len(bench)]
    return Strata(tuple(bench[i] for i in starts), np.array(starts, dtype=np.intp),
                  np.array(stops, dtype=np.intp))


def point_counts(cube: Cube, strata: Strata, a_idx: np.ndarray, b_idx: np.ndarray):
    """num, den [P, S, C]: Σ(bit_a − bit_b) and paired items per pair, benchmark, config."""
    paired = cube.present[a_idx] & cube.present[b_idx]
    a_right = cube.bits[a_idx] & paired
    b_right = cube.bits[b_idx] & paired
    shape = (len(a_idx), len(strata.names), len(cube.configs))
    num, den = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    for s, (lo, hi) in enumerate(zip(strata.starts.tolist(), strata.stops.tolist())):
        num[:, s] = (np.count_nonzero(a_right[:, lo:hi], axis=1)
                     - np.count_nonzero(b_right[:, lo:hi], axis=1))
        den[:, s] = np.count_nonzero(paired[:, lo:hi], axis=1)
    return num, den


def bootstrap_counts(cube: Cube, strata: Strata, cols: np.ndarray, n_boot: int, seed: int):
    """num*, den* [S, B, K] float32 for columns cols[K, 3] = (model a, model b, config):
    each benchmark resampled with replacement to its own size (stratified, paired)."""
    k = len(cols)
    num = np.zeros((len(strata.names), n_boot, k), dtype=np.float32)
    den = np.zeros_like(num)
    for s, (lo, hi) in enumerate(zip(strata.starts.tolist(), strata.stops.tolist())):
        items = np.arange(lo, hi)[None, :]
        a, b, c = cols[:, [0]], cols[:, [1]], cols[:, [2]]
        paired = cube.present[a, items, c] & cube.present[b, items, c]  # [K, n]
        diff = ((cube.bits[a, items, c].astype(np.float32) - cube.bits[b, items, c]) * paired).T
        paired_f = None if paired.all() else paired.T.astype(np.float32)
        n = hi - lo
        rng = rng_for(seed, STREAM_DECISIONS * 1000 + s)
        for start in range(0, n_boot, _ROWS_PER_CHUNK):
            rows = min(_ROWS_PER_CHUNK, n_boot - start)
            w = resample_counts(rng, n, rows, np.float32)
            num[s, start:start + rows] = w @ diff
            den[s, start:start + rows] = n if paired_f is None else w @ paired_f
    return num, den


def target_estimates(num: np.ndarray, den: np.ndarray, supported: np.ndarray) -> dict:
    """{target: estimate} from per-benchmark sums num, den [S, ...]; supported [S, ...]
    marks the benchmarks a target may weigh (those with paired items at the point)."""
    num, den = num.astype(np.float64), den.astype(np.float64)  # exact counts, float64 ratios
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = num.sum(axis=0) / den.sum(axis=0)
        per_bench = num / den
        n_sup = supported.sum(axis=0)
        balanced = np.where(supported, per_bench, 0.0).sum(axis=0) / n_sup
        # a resample that lost every paired item of a supported benchmark is undefined
        lost = (supported & (den == 0)).any(axis=0)
        balanced = np.where(lost | (n_sup == 0), np.nan, balanced)
    return {"observed": observed, "balanced": balanced}


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


def simultaneous_intervals(samples: np.ndarray, point: np.ndarray, level: float = LEVEL):
    """Max-deviation (studentised) bootstrap band for a family of estimates.

    samples [B, P], point [P]: q = the level-quantile over resamples of max_p |Δ*−Δ̂|/se_p;
    interval Δ̂_p ± q·se_p. Members with se = 0 get the degenerate interval [Δ̂, Δ̂]."""
    finite = np.isfinite(samples)
    n_ok = finite.sum(axis=0)
    filled = np.where(finite, samples, 0.0)
    mean = filled.sum(axis=0) / np.maximum(n_ok, 1)
    se = np.sqrt((np.where(finite, samples - mean, 0.0) ** 2).sum(axis=0) / np.maximum(n_ok, 1))
    use = np.isfinite(point) & (n_ok > 0) & (se > 0)
    lo, hi = point.astype(np.float64), point.astype(np.float64)
    if use.any():
        dev = np.abs(samples[:, use] - point[use]) / se[use]
        rows = np.isfinite(dev).any(axis=1)  # a resample undefined for every member is dropped
        worst = np.where(np.isfinite(dev[rows]), dev[rows], -np.inf).max(axis=1)
        q = float(np.percentile(worst, level * 100)) if rows.any() else np.nan
        lo[use], hi[use] = point[use] - q * se[use], point[use] + q * se[use]
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


def _sign(x: float | None) -> int:
    if x is None or abs(x) <= TOL:
        return 0
    return 1 if x > 0 else -1


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
    boot = _bootstrap(cube, strata, plan, supported, n_boot, seed)

    cls = cls if cls is not None else classify(cube)
    a_only = np.count_nonzero(cls.robust_correct[a_idx] & cls.robust_wrong[b_idx], axis=1)
    b_only = np.count_nonzero(cls.robust_wrong[a_idx] & cls.robust_correct[b_idx], axis=1)
    mc_p = mcnemar_exact_p(a_only, b_only)
    simult = _simultaneous(plan, boot.samples, point, adjacent, c0)

    out = []
    for p, (a, b) in enumerate(pairs):
        k0 = plan.where[(p, c0)]
        unsupported = tuple(strata.names[s] for s in np.flatnonzero(~supported[p, :, c0]))
        per_bench = tuple(
            BenchmarkDelta(name, int(den[p, s, c0]),
                           _f(num[p, s, c0] / den[p, s, c0]) if den[p, s, c0] else None,
                           _interval(boot.bench_ci[s][0][k0], boot.bench_ci[s][1][k0]))
            for s, name in enumerate(strata.names))
        for t in TARGETS:
            delta = _f(point[t][p, c0])
            other_delta = _f(point[TARGETS[1 - TARGETS.index(t)]][p, c0])
            ci = _interval(boot.ci[t][0][k0], boot.ci[t][1][k0])
            # the movement is other − this: balanced − observed, negated for balanced
            lo, hi = boot.move_ci[0][k0], boot.move_ci[1][k0]
            move_ci = _interval(lo, hi) if t == "observed" else _interval(-hi, -lo)
            harness = _harness_configs(plan, p, c0, delta, point[t], boot.ci[t], m, cube.configs)
            flags = _flags(delta, ci, bool(unsupported), bool(harness), other_delta, move_ci, m)
            out.append(Decision(
                a=a, b=b, config=config, target=t, delta=delta, ci=ci,
                label=flags[0] if flags else "stable", flags=flags, margin=float(margin),
                n_items=int(den[p, :, c0].sum()), other_target_delta=other_delta,
                movement_ci=move_ci, harness_configs=harness,
                unsupported_benchmarks=unsupported, mcnemar_a_only=int(a_only[p]),
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
    can make a decision harness-sensitive, hence the only ones worth bootstrapping."""
    plan = _Plan()
    n_configs = point["observed"].shape[1]
    for p in range(len(a_idx)):
        plan.need(p, a_idx[p], b_idx[p], c0)
        for t in TARGETS:
            s0 = _sign(_f(point[t][p, c0]))
            if not s0:
                continue
            for c in range(n_configs):
                est = point[t][p, c]
                if c != c0 and np.isfinite(est) and _sign(est) == -s0 and abs(est) >= m - TOL:
                    plan.need(p, a_idx[p], b_idx[p], c)
    return plan


@dataclass(frozen=True, eq=False)
class _Boot:
    samples: dict  # target -> [B, K] resampled Δ̂
    ci: dict  # target -> (lo[K], hi[K])
    move_ci: tuple  # (lo[K], hi[K]) of balanced − observed
    bench_ci: list  # per benchmark (lo[K], hi[K])


def _bootstrap(cube: Cube, strata: Strata, plan: _Plan, supported, n_boot: int, seed: int) -> _Boot:
    cols = np.array(plan.cols, dtype=np.intp)
    bnum, bden = bootstrap_counts(cube, strata, cols, n_boot, seed)  # [S, B, K]
    col_pair = np.array([p for (p, _c) in plan.where])
    col_conf = np.array([c for (_p, c) in plan.where])
    sup_cols = supported[col_pair, :, col_conf].T  # [S, K]
    samples = target_estimates(bnum, bden, sup_cols[:, None, :])  # {t: [B, K]}
    with np.errstate(invalid="ignore", divide="ignore"):
        bench = bnum.astype(np.float64) / bden  # [S, B, K]
    return _Boot(samples, {t: percentile_ci(samples[t]) for t in TARGETS},
                 percentile_ci(samples["balanced"] - samples["observed"]),
                 [percentile_ci(bench[s]) for s in range(len(strata.names))])


def _flags(delta, ci, unsupported: bool, harness: bool, other_delta, move_ci, m) -> tuple:
    """SPEC §9 flags in their order; the first one is the label."""
    flags = []
    if unsupported or delta is None:
        flags.append("unsupported")
    if harness:
        flags.append("harness-sensitive")
    if not _supports_winner(delta, ci) or abs(delta) < m - TOL:
        flags.append("underpowered")
    if _target_sensitive(delta, other_delta, move_ci, m):
        flags.append("target-sensitive")
    return tuple(flags)


def _supports_winner(delta, ci) -> bool:
    """The interval lies wholly on Δ̂'s side of zero (1e-9 tolerance). An interval that
    includes zero, and one wholly on the side opposite Δ̂ (a percentile interval can miss
    its own point estimate), both leave the winner Δ̂ names unsupported: `underpowered`,
    never `stable` (§9: stable means the winner is supported)."""
    if ci is None or delta is None:
        return False
    side = _sign(delta)
    return (side > 0 and ci[0] > TOL) or (side < 0 and ci[1] < -TOL)


def _harness_configs(plan: _Plan, p: int, c0: int, delta, point_t, ci_t, m, configs):
    """§11: Δ̂ ≠ 0 and another config, same target, strictly reverses the sign with its own
    interval excluding zero and |Δ̂| ≥ m."""
    s0 = _sign(delta)
    if not s0:
        return ()
    hits = []
    for c in range(len(configs)):
        k = plan.where.get((p, c))
        if c == c0 or k is None:
            continue
        est, lo, hi = point_t[p, c], ci_t[0][k], ci_t[1][k]
        if not (np.isfinite(est) and np.isfinite(lo) and np.isfinite(hi)):
            continue
        excludes = hi < -TOL if s0 > 0 else lo > TOL
        if _sign(est) == -s0 and abs(est) >= m - TOL and excludes:
            hits.append(configs[c])
    return tuple(hits)


def _target_sensitive(delta, other, move_ci, m) -> bool:
    if delta is None or other is None:
        return False
    if _sign(delta) * _sign(other) < 0:
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
