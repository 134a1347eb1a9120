"""Verdict calibration: how often each SPEC §6 verdict and §9 label comes out for a pair when
its gap is real, and when there is none, on grids simulated to match the observed one.

The matched model is conditional on the observed grid (docs/spec.md, "Verdict calibration"):
for a pair (A, B), one replicate draws every benchmark's items with replacement to its own
size, each drawn item bringing both models' rows over the configs in view (bits and presence).
  real: the replicate as drawn. The truth is the observed grid itself, so each model keeps its
        per-config accuracies and its robust-correct / robust-wrong / fragile shares (per
        benchmark) in expectation, and the expected gap equals the observed one.
  none: the same draw with A's and B's rows swapped on each item by a fair coin: both models
        then share one profile (the 50/50 mixture of the two), so their expected accuracies
        are equal under every config and the true gap is zero.
Both scenarios keep the item-level dependence between the two models (easy items are easy
for both) that decides every verdict. Verdicts and labels are then computed on each
replicate by the project's own functions: `pairs.verdict`, `pairs.mcnemar_exact_p` (on the
classification gathered from the observed one: a model's class on an item moves with its row)
and `decisions.decide_pairs`, on all replicates of a scenario at once (stacked as models).

Pure numpy; nothing here reads or writes a store (caching: services/reports.py, grid_calibration)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from fragility_tui.analysis.classify import (ROBUST_CORRECT, ROBUST_WRONG, Classification,
                                             classify)
from fragility_tui.analysis.decisions import (FLAGS, TARGETS, canonical, decide_pairs,
                                              strata_of)
from fragility_tui.analysis.pairs import (MANUFACTURED_ALPHA, gap_splits, mcnemar_exact_p,
                                          verdict)
from fragility_tui.grid.cube import Cube

METHOD_VERSION = 1  # part of every cache key: bump when a figure's meaning changes
REPLICATES = 200  # per scenario
N_BOOT = 500  # bootstrap resamples behind each simulated decision label
STREAM_CALIBRATION = 5  # itemstats' streams are 1-4
SCENARIOS = ("real", "none")
VERDICTS = ("ordered", "one item", "cancel", "identical")
LABELS = ("stable", "underpowered", "harness-sensitive", "target-sensitive", "unsupported")
_CELL_BUDGET = 40_000_000  # stacked (model, item, config) cells per decide_pairs call
assert set(LABELS) == {"stable", *FLAGS}


def pair_rng(seed: int, a: str, b: str) -> np.random.Generator:
    """A pair's own stream: its replicates do not depend on which other pairs are asked."""
    words = [int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")
             for name in sorted((a, b))]
    return np.random.default_rng([int(seed), STREAM_CALIBRATION, *words])


def draw_replicates(cube: Cube, replicates: int, rng: np.random.Generator):
    """idx [R, I]: item drawn into each position (within the position's benchmark, cube in
    canonical order); swap [R, I]: the no-gap scenario's coin per drawn item."""
    strata = strata_of(cube)
    idx = np.empty((replicates, len(cube.items)), dtype=np.intp)
    for lo, hi in zip(strata.starts.tolist(), strata.stops.tolist()):
        idx[:, lo:hi] = rng.integers(lo, hi, size=(replicates, hi - lo))
    swap = rng.random((replicates, len(cube.items))) < 0.5
    return idx, swap


def scenario_rows(rows_a: np.ndarray, rows_b: np.ndarray, idx: np.ndarray, swap: np.ndarray,
                  scenario: str) -> tuple[np.ndarray, np.ndarray]:
    """The simulated A and B values [R, I, ...] of any per-(model, item) array (bits,
    presence, class codes) of the two models: gathered by idx, swapped for `none`."""
    a, b = rows_a[idx], rows_b[idx]
    if scenario == "real":
        return a, b
    s = swap.reshape(swap.shape + (1,) * (a.ndim - 2))
    return np.where(s, b, a), np.where(s, a, b)


def stacked_rows(rows_a: np.ndarray, rows_b: np.ndarray, idx: np.ndarray, swap: np.ndarray,
                 scenario: str) -> np.ndarray:
    """scenario_rows stacked as [R, 2, I, ...] in one gather (A at 0, B at 1)."""
    both = np.stack([rows_a, rows_b])
    side = np.arange(2)[None, :, None]
    if scenario == "none":
        side = side ^ swap[:, None, :]
    return both[side, idx[:, None, :]]


def simulated_cube(cube: Cube, a: int, b: int, idx, swap, scenario: str) -> Cube:
    """The replicates of one scenario as one cube: replicate r is models 2r (A) and 2r+1 (B),
    named so that their sorted order is this order (decide_pairs sorts by name)."""
    n = 2 * len(idx)
    shape = (n,) + cube.bits.shape[1:]
    bits = stacked_rows(cube.bits[a], cube.bits[b], idx, swap, scenario).reshape(shape)
    if cube.present[[a, b]].all():
        present = np.broadcast_to(np.True_, shape)  # read-only, no memory
    else:
        present = stacked_rows(cube.present[a], cube.present[b], idx, swap,
                               scenario).reshape(shape)
    return Cube(tuple(f"{k:07d}" for k in range(n)), cube.items, cube.configs, bits, present,
                cube.benchmarks, None, cube.reference)


def _verdict_tally(cube: Cube, cls: Classification, a: int, b: int, idx, swap, scenario):
    codes_a, codes_b = scenario_rows(cls.codes[a], cls.codes[b], idx, swap, scenario)
    ref = cube.reference_index
    bits_a, bits_b = scenario_rows(cube.bits[a, :, ref], cube.bits[b, :, ref], idx, swap, scenario)
    pres_a, pres_b = scenario_rows(cube.present[a, :, ref], cube.present[b, :, ref], idx, swap,
                                   scenario)
    paired = pres_a & pres_b
    gap = np.count_nonzero(bits_a & paired, axis=1) - np.count_nonzero(bits_b & paired, axis=1)
    a_only = np.count_nonzero((codes_a == ROBUST_CORRECT) & (codes_b == ROBUST_WRONG), axis=1)
    b_only = np.count_nonzero((codes_a == ROBUST_WRONG) & (codes_b == ROBUST_CORRECT), axis=1)
    manufactured = (gap != 0) & (mcnemar_exact_p(a_only, b_only) >= MANUFACTURED_ALPHA)
    verdicts = [verdict(int(x), int(y)) for x, y in zip(a_only.tolist(), b_only.tolist())]
    return gap, verdicts, manufactured


def _label_tally(cube: Cube, cls: Classification, a: int, b: int, idx, swap, scenario, *,
                 n_boot: int, seed: int, margin: float) -> dict:
    """{target: [label per replicate]} from decide_pairs on the stacked replicates, in
    chunks that keep the stacked cube under _CELL_BUDGET cells."""
    per_rep = 2 * len(cube.items) * max(len(cube.configs), 1)
    chunk = max(1, _CELL_BUDGET // per_rep)
    labels = {t: [] for t in TARGETS}
    for start in range(0, len(idx), chunk):
        part = slice(start, start + chunk)
        sim = simulated_cube(cube, a, b, idx[part], swap[part], scenario)
        codes = stacked_rows(cls.codes[a], cls.codes[b], idx[part], swap[part],
                             scenario).reshape(len(sim.models), -1)
        complete = stacked_rows(cls.complete[a], cls.complete[b], idx[part], swap[part],
                                scenario).reshape(codes.shape)
        pairs = list(zip(sim.models[0::2], sim.models[1::2]))
        for d in decide_pairs(sim, pairs, margin=margin, seed=seed, n_boot=n_boot,
                              cls=Classification(codes, complete)):
            labels[d.target].append(d.label)
    return labels


def _counts(values, names) -> dict:
    values = list(values)
    return {n: sum(v == n for v in values) for n in names}


def calibrate_pair(cube: Cube, a: str, b: str, *, replicates: int = REPLICATES, seed: int = 0,
                   n_boot: int = N_BOOT, margin: float = 2.0,
                   cls: Classification | None = None) -> dict:
    """Tallies for one pair over `replicates` replicates of each scenario. The pair is
    simulated in name order, so (A, B) and (B, A) get the same tallies; `a`, `b` only orient
    the observed gap and the mean simulated gaps. cube: canonical (see `calibrate`)."""
    first, second = sorted((a, b))
    i, j = cube.models.index(first), cube.models.index(second)
    cls = cls if cls is not None else classify(cube)
    idx, swap = draw_replicates(cube, replicates, pair_rng(seed, first, second))
    sign = 1 if first == a else -1
    out = {"a": a, "b": b, "replicates": replicates}
    for scenario in SCENARIOS:
        gap, verdicts, manufactured = _verdict_tally(cube, cls, i, j, idx, swap, scenario)
        labels = _label_tally(cube, cls, i, j, idx, swap, scenario, n_boot=n_boot, seed=seed,
                              margin=margin)
        out[scenario] = {
            "mean_gap": sign * float(gap.mean()) if replicates else None,
            "verdicts": _counts(verdicts, VERDICTS),
            "manufactured": int(np.count_nonzero(manufactured)),
            "labels": {t: _counts(labels[t], LABELS) for t in TARGETS},
        }
    return out


def observed_outcomes(cube: Cube, pairs, margin: float = 2.0, seed: int = 0) -> list[dict]:
    """What the report says of each pair (A above B): gap, verdict, manufactured, label per
    target (decide_pairs' default 2,000 resamples, as `report`)."""
    pos = {m: k for k, m in enumerate(cube.models)}
    splits = gap_splits(cube, [(pos[a], pos[b]) for a, b in pairs])
    decisions = decide_pairs(cube, pairs, margin=margin, seed=seed)
    return [{"gap": s.gap, "verdict": s.verdict, "manufactured": s.manufactured,
             "labels": {d.target: d.label for d in decisions[2 * k:2 * k + 2]}}
            for k, s in enumerate(splits)]


def pair_key(a: str, b: str) -> tuple[str, str]:
    """How a pair's tallies are keyed (they do not depend on the pair's order)."""
    return tuple(sorted((a, b)))


def calibrate(cube: Cube, pairs=None, *, replicates: int = REPLICATES, seed: int = 0,
              n_boot: int = N_BOOT, margin: float = 2.0, cached: dict | None = None) -> dict:
    """Calibration of `pairs` [(A, B)] (default: the adjacent pairs of the reference
    ranking, A above B). cached: {pair_key: tallies} computed earlier with the same cube and
    settings; the result's `new` holds the tallies computed now, under the same keys."""
    from fragility_tui.analysis.pairs import adjacent_pairs

    adjacent = pairs is None
    if adjacent:
        pairs = [(cube.models[i], cube.models[j]) for i, j in adjacent_pairs(cube)]
    canon = canonical(cube)
    cls = classify(canon)
    cached = dict(cached or {})
    new = {}
    for a, b in pairs:
        key = pair_key(a, b)
        if key not in cached:
            new[key] = cached[key] = calibrate_pair(canon, a, b, replicates=replicates,
                                                    seed=seed, n_boot=n_boot, margin=margin,
                                                    cls=cls)
    observed = observed_outcomes(canon, pairs, margin=margin, seed=seed)
    rows = [dict(oriented(cached[pair_key(a, b)], a, b), observed=obs, adjacent=adjacent)
            for (a, b), obs in zip(pairs, observed)]
    return {"settings": settings(cube, replicates=replicates, seed=seed, n_boot=n_boot,
                                 margin=margin),
            "pairs": rows, "totals": totals(rows), "new": new}


def totals(rows: list[dict]) -> dict:
    """Each scenario's tallies summed over the pairs (replicates × pairs draws)."""
    out = {"replicates": sum(r["replicates"] for r in rows)}
    for scenario in SCENARIOS:
        out[scenario] = {
            "verdicts": {v: sum(r[scenario]["verdicts"][v] for r in rows) for v in VERDICTS},
            "manufactured": sum(r[scenario]["manufactured"] for r in rows),
            "labels": {t: {x: sum(r[scenario]["labels"][t][x] for r in rows) for x in LABELS}
                       for t in TARGETS}}
    return out


def cube_digest(cube: Cube) -> str:
    """sha256 of everything a calibration reads: the canonical cube's names, benchmarks,
    configs, reference, bits and presence."""
    cube = canonical(cube)
    h = hashlib.sha256(json.dumps([cube.models, cube.items, [str(x) for x in cube.benchmarks],
                                   cube.configs, cube.reference]).encode())
    h.update(np.packbits(cube.bits.ravel()).tobytes())
    h.update(np.packbits(cube.present.ravel()).tobytes())
    return h.hexdigest()


def settings(cube: Cube, *, replicates: int = REPLICATES, seed: int = 0, n_boot: int = N_BOOT,
             margin: float = 2.0) -> dict:
    return {"method_version": METHOD_VERSION, "reference": cube.reference,
            "replicates": int(replicates), "seed": int(seed), "n_boot": int(n_boot),
            "margin_points": float(margin)}


def cache_key(cube: Cube, config: dict) -> str:
    """One key per (grid content, reference, replicates, seed, bootstrap, margin, method)."""
    return hashlib.sha256(json.dumps([cube_digest(cube), config], sort_keys=True)
                          .encode()).hexdigest()


def oriented(result: dict, a: str, b: str) -> dict:
    """A pair's tallies (as cached, for either order) oriented as A above B."""
    if (result["a"], result["b"]) == (a, b):
        return result
    out = dict(result, a=a, b=b)
    for scenario in SCENARIOS:
        out[scenario] = dict(result[scenario], mean_gap=-result[scenario]["mean_gap"])
    return out


def share(result: dict, scenario: str, outcome: str, target: str | None = None) -> float:
    """Fraction of a scenario's replicates with this outcome: a verdict, 'manufactured', or
    (with target) a decision label."""
    tally = result[scenario]
    if target is not None:
        n = tally["labels"][target][outcome]
    elif outcome == "manufactured":
        n = tally["manufactured"]
    else:
        n = tally["verdicts"][outcome]
    return n / result["replicates"] if result["replicates"] else float("nan")


def summary_line(result: dict, outcome: str, target: str | None = None,
                 width: int = 78) -> str:
    """The panes' one line: how often the outcome comes out with the pair's gap real and
    with none; the longest wording that fits `width` (the shortest fits 78 columns for
    every outcome and target name, up to 9,999 replicates)."""
    real, none = (round(100 * share(result, s, outcome, target)) for s in SCENARIOS)
    n, what = result["replicates"], f"'{outcome}'" if target is None else f"{target} '{outcome}'"
    variants = [
        f"calibration ({n} replicates): {what} in {real}% with a real gap of this size, "
        f"{none}% with none",
        f"calibration ({n} reps): {what} {real}% with a real gap, {none}% with none",
        f"calib. {n} reps: {what} {real}% if gap real, {none}% if none",
    ]
    return next((v for v in variants if len(v) <= width), variants[-1])
