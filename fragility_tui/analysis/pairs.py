"""SPEC §6: the reference ranking, adjacent pairs and the stable/fragile split of each gap."""

from __future__ import annotations

from dataclasses import dataclass

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from fragility_tui.analysis.classify import (Classification, ConfigAccuracy, classify,
                                             config_accuracy)
from fragility_tui.grid.cube import Cube

MANUFACTURED_ALPHA = 0.05


def reference_ranking(cube: Cube, acc: ConfigAccuracy | None = None) -> list[int]:
    """Model indices by reference accuracy descending; ties (and undefined, last) by name."""
    acc = acc if acc is not None else config_accuracy(cube)
    ref_acc = acc.accuracy[:, cube.reference_index]
    key = [(np.isnan(a), -a if np.isfinite(a) else 0.0, name)
           for a, name in zip(ref_acc.tolist(), cube.models)]
    return sorted(range(len(cube.models)), key=key.__getitem__)


def ranks(values: np.ndarray) -> np.ndarray:
    """SPEC §11: rank = 1 + number of strictly higher values, per column; NaN stays unranked
    (rank 0). values is [M] or [M, C]."""
    v = values if values.ndim == 2 else values[:, None]
    higher = (v[None, :, :] > v[:, None, :]).sum(axis=1)  # [M, C]: how many beat m
    r = np.where(np.isnan(v), 0, 1 + higher)
    return r if values.ndim == 2 else r[:, 0]


def adjacent_pairs(cube: Cube, acc: ConfigAccuracy | None = None) -> list[tuple[int, int]]:
    """Consecutive models of the reference ranking (A above B); models without a
    reference accuracy are left out."""
    acc = acc if acc is not None else config_accuracy(cube)
    order = [m for m in reference_ranking(cube, acc)
             if np.isfinite(acc.accuracy[m, cube.reference_index])]
    return list(zip(order[:-1], order[1:]))


_EXACT_LIMIT = 5000  # discordant items up to which the tail is summed in exact integers


@lru_cache(maxsize=4096)
def _two_sided_binomial_half(k: int, n: int) -> float:
    """min(1, 2·P(X ≤ k)) for X ~ Binomial(n, 1/2), k ≤ n/2: the exact two-sided test
    (the distribution is symmetric). Exact integer sums up to _EXACT_LIMIT items, beyond
    that a log-space sum (relative error ~1e-12; scipy is not imported just for this)."""
    if n == 0:
        return 1.0
    if n <= _EXACT_LIMIT:
        term, total = 1, 1
        for j in range(k):
            term = term * (n - j) // (j + 1)
            total += term
        return min(1.0, float(Fraction(2 * total, 2 ** n)))
    logs = [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) for j in range(k + 1)]
    top = max(logs)
    log_tail = top + math.log(sum(math.exp(v - top) for v in logs)) - n * math.log(2)
    return min(1.0, 2.0 * math.exp(log_tail))


def mcnemar_exact_p(a_only, b_only) -> np.ndarray:
    """Exact two-sided binomial (McNemar) test of a_only vs b_only at p = 1/2, per pair.
    With no discordant items the test has no evidence: p = 1."""
    a = np.atleast_1d(np.asarray(a_only, dtype=np.int64))
    b = np.atleast_1d(np.asarray(b_only, dtype=np.int64))
    return np.array([_two_sided_binomial_half(int(min(x, y)), int(x + y))
                     for x, y in zip(a.tolist(), b.tolist())], dtype=np.float64)


@dataclass(frozen=True)
class GapSplit:
    """SPEC §6 gap split of one pair (A above B), in items."""

    a: str
    b: str
    gap: int  # Δ over items where both have the reference cell (§11)
    stable_items: int  # |S|
    a_only_stable: int
    b_only_stable: int
    stable_gap: int
    incomplete_gap: int  # the part of Δ on items where either row is incomplete (SPEC v3)
    fragile_gap: int  # Δ − stable_gap − incomplete_gap: complete rows only
    fragile_share: float | None
    verdict: str
    manufactured: bool
    mcnemar_p: float
    reversals: int
    adjacent: bool = True
    # why the verdict cannot say more, e.g. "too few stable disagreements to order (n = 3)"
    detail: str | None = None
    # SPEC v4: what the stable set says about the gap: supported | manufactured | reversed,
    # None when Δ = 0
    support: str | None = None
    reversed: bool = False

    def to_json(self) -> dict:
        return dict(self.__dict__)


def too_few_to_order(n: int) -> bool:
    """With n stable disagreements, can the exact test behind `manufactured` reject at
    all? Its smallest two-sided p is 2 / 2**n, ≥ 0.05 up to n = 5: there the stable set
    cannot order a pair, whatever the split, so `manufactured` holds by construction."""
    return _two_sided_binomial_half(0, int(n)) >= MANUFACTURED_ALPHA


def split_detail(a_only: int, b_only: int) -> str | None:
    n = int(a_only) + int(b_only)
    return f"too few stable disagreements to order (n = {n})" if too_few_to_order(n) else None


def verdict(a_only: int, b_only: int) -> str:
    if a_only == 0 and b_only == 0:
        return "identical"
    if a_only + b_only == 1:
        return "one item"
    if a_only > 0 and b_only > 0 and abs(a_only - b_only) <= 1:
        return "cancel"
    return "differs"


def support(gap: int, stable_gap: int, p: float) -> str | None:
    """SPEC §6 v4: the exact test of a_only against b_only says whether the stable set
    supports Δ's sign, orders the pair against it, or cannot tell (manufactured)."""
    if gap == 0:
        return None
    if p >= MANUFACTURED_ALPHA:
        return "manufactured"
    return "supported" if np.sign(stable_gap) == np.sign(gap) else "reversed"


def pair_sets(cube: Cube, a: int, b: int, cls: Classification | None = None) -> dict:
    """Item index sets behind a pair's split, for drill-down (cube item order)."""
    cls = cls if cls is not None else classify(cube)
    ref = cube.reference_index
    stable = cls.robust[a] & cls.robust[b]
    a_only = cls.robust_correct[a] & cls.robust_wrong[b]
    b_only = cls.robust_wrong[a] & cls.robust_correct[b]
    paired = cube.present[a, :, ref] & cube.present[b, :, ref]
    differ = paired & (cube.bits[a, :, ref] != cube.bits[b, :, ref])
    complete = cls.complete[a] & cls.complete[b]
    return {
        "stable": np.flatnonzero(stable),
        "a_only_stable": np.flatnonzero(a_only),
        "b_only_stable": np.flatnonzero(b_only),
        # reference disagreements on complete rows outside the stable set: where the
        # fragile gap lives (SPEC v3: rows with a missing cell are the incomplete gap's)
        "fragile_disagreements": np.flatnonzero(differ & complete & ~(a_only | b_only)),
        "incomplete_disagreements": np.flatnonzero(differ & ~complete),
    }


def gap_splits(cube: Cube, pairs: list[tuple[int, int]], cls: Classification | None = None,
               acc: ConfigAccuracy | None = None, adjacent: bool = True) -> list[GapSplit]:
    cls = cls if cls is not None else classify(cube)
    acc = acc if acc is not None else config_accuracy(cube)
    if not pairs:
        return []
    ref = cube.reference_index
    a_idx = np.array([p[0] for p in pairs])
    b_idx = np.array([p[1] for p in pairs])
    bits_ref, pres_ref = cube.bits[:, :, ref], cube.present[:, :, ref]
    paired = pres_ref[a_idx] & pres_ref[b_idx]
    gap = (np.count_nonzero(bits_ref[a_idx] & paired, axis=1)
           - np.count_nonzero(bits_ref[b_idx] & paired, axis=1))
    # §6 v3: reference bits of paired items where either model misses a cell in view; they
    # are neither stable nor fragile, so without this term they would read as fragility
    partial = paired & ~(cls.complete[a_idx] & cls.complete[b_idx])
    inc = (np.count_nonzero(bits_ref[a_idx] & partial, axis=1)
           - np.count_nonzero(bits_ref[b_idx] & partial, axis=1))
    stable = np.count_nonzero(cls.robust[a_idx] & cls.robust[b_idx], axis=1)
    a_only = np.count_nonzero(cls.robust_correct[a_idx] & cls.robust_wrong[b_idx], axis=1)
    b_only = np.count_nonzero(cls.robust_wrong[a_idx] & cls.robust_correct[b_idx], axis=1)
    p = mcnemar_exact_p(a_only, b_only)
    rev = reversals(cube, acc, a_idx, b_idx)
    out = []
    for k in range(len(pairs)):
        g, ao, bo, ig = int(gap[k]), int(a_only[k]), int(b_only[k]), int(inc[k])
        sg = ao - bo
        fg = g - sg - ig
        backing = support(g, sg, float(p[k]))
        out.append(GapSplit(
            a=cube.models[a_idx[k]], b=cube.models[b_idx[k]], gap=g, stable_items=int(stable[k]),
            a_only_stable=ao, b_only_stable=bo, stable_gap=sg, incomplete_gap=ig,
            fragile_gap=fg, fragile_share=None if g == 0 else fg / g,
            verdict=verdict(ao, bo),
            manufactured=backing == "manufactured",
            mcnemar_p=float(p[k]), reversals=int(rev[k]), adjacent=adjacent,
            detail=split_detail(ao, bo), support=backing, reversed=backing == "reversed"))
    return out


def reversals(cube: Cube, acc: ConfigAccuracy, a_idx: np.ndarray, b_idx: np.ndarray) -> np.ndarray:
    """Configs whose accuracy order of the pair strictly reverses the reference order
    (ties count as not reversed; a pair tied in the reference has 0)."""
    acc_a, acc_b = acc.accuracy[a_idx], acc.accuracy[b_idx]
    ref = cube.reference_index
    with np.errstate(invalid="ignore"):
        ref_sign = np.sign(acc_a[:, ref] - acc_b[:, ref])
        cfg_sign = np.sign(acc_a - acc_b)
    flipped = (ref_sign[:, None] != 0) & (cfg_sign == -ref_sign[:, None])
    return np.count_nonzero(np.nan_to_num(flipped), axis=1)


@dataclass(frozen=True)
class PairsSummary:
    """SPEC §6 over a set of pairs: fragile share mean and pooled over pairs with Δ ≠ 0."""

    mean_fragile_share: float | None
    pooled_fragile_share: float | None
    manufactured: int
    nonzero_gaps: int
    pooled_fragile_share_ci: tuple[float, float] | None = None  # items resampled (SPEC v3 issue)
    pooled_fragile_share_ci_unit: str = "items"
    reversed: int = 0  # SPEC v4: pairs whose stable set orders them against Δ
    supported: int = 0

    def to_json(self) -> dict:
        ci = self.pooled_fragile_share_ci
        return {**self.__dict__, "pooled_fragile_share_ci": None if ci is None else list(ci)}


def pairs_summary(splits: list[GapSplit]) -> PairsSummary:
    """Mean and pooled fragile share over pairs with Δ ≠ 0 (SPEC §6)."""
    nonzero = [s for s in splits if s.gap != 0]
    total_gap = sum(s.gap for s in nonzero)
    return PairsSummary(
        mean_fragile_share=(float(np.mean([s.fragile_share for s in nonzero]))
                            if nonzero else None),
        pooled_fragile_share=(sum(s.fragile_gap for s in nonzero) / total_gap
                              if nonzero and total_gap != 0 else None),
        manufactured=sum(s.manufactured for s in splits),
        nonzero_gaps=len(nonzero),
        reversed=sum(s.support == "reversed" for s in splits),
        supported=sum(s.support == "supported" for s in splits))
