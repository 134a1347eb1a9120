"""Verdict calibration: how often each SPEC §6 verdict and §9 label comes out for a pair on
grids simulated to match the observed one, under four named scenarios, each saying what it
measures (docs/spec.md, "Verdict calibration"):

  reproducibility_at_observed_gap  every benchmark's items redrawn with replacement, both
        models' rows with them. The truth is the observed grid itself (its gap included),
        so this is how often a label comes back at the observed gap: reproducibility, not
        a true-positive rate (the observed gap is an estimate, not a known truth).
  false_alarms_exchangeable  the same draws with A's and B's rows exchanged on each item by
        a fair coin: one shared profile (the 50/50 mixture), true gap 0 under every config
        and no harness effect between them: the strongest null.
  false_alarms_harness_kept  no reference gap, but each model's own harness effects kept:
        whole robust rows turned so that every benchmark's reference gap is 0 while each
        model's config-to-config pattern is exactly the grid's (calibration_truths.py says
        why this construction), then redrawn as above.
  power_at_margin  the same construction with a true reference gap of exactly the margin m
        in the observed direction: how often a gap at m is called `stable` (power at m).

All four use the same item draws (common random numbers). Verdicts and labels are computed
on each replicate by the project's own functions (`pairs.verdict`, `pairs.mcnemar_exact_p`
on the classification gathered from the truth: a model's class moves with its row, and
`decisions.decide_pairs` on all replicates of a scenario at once, stacked as models).
Besides, for a family of pairs (the adjacent ones), `family_largest_gap`: how often the
largest adjacent |gap| under the exchangeable null reaches the observed largest.
Every count is reported with its rate and 95% Wilson interval (binomial.py).

Pure numpy; nothing here reads or writes a store (caching: services/reports.py, grid_calibration)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from fragility_tui.analysis import calibration_truths as truths
from fragility_tui.analysis.binomial import INTERVAL_NAME, rate
from fragility_tui.analysis.intervals import interval
from fragility_tui.analysis.classify import (ROBUST_CORRECT, ROBUST_WRONG, Classification,
                                             classify)
from fragility_tui.analysis.decisions import (FLAGS, TARGETS, canonical, decide_pairs,
                                              strata_of)
from fragility_tui.analysis.pairs import (MANUFACTURED_ALPHA, gap_splits, mcnemar_exact_p,
                                          verdict)
from fragility_tui.grid.cube import Cube

# part of every cache key: bump when a cached figure's meaning changes (2: four named
# scenarios instead of "real"/"none", true gaps and shortfalls recorded; 3: SPEC v4's
# verdict `differs` and its decision rules; 4: each truth's harness reversal recorded, so
# only errors under the truth are counted as false alarms)
METHOD_VERSION = 4
REPLICATES = 200  # per scenario
N_BOOT = 500  # bootstrap resamples behind each simulated decision label
STREAM_CALIBRATION = 5  # itemstats' streams are 1-4
REPRODUCIBILITY = "reproducibility_at_observed_gap"
EXCHANGEABLE = "false_alarms_exchangeable"
HARNESS_KEPT = "false_alarms_harness_kept"
POWER = "power_at_margin"
FAMILY = "family_largest_gap"
SCENARIOS = (REPRODUCIBILITY, EXCHANGEABLE, HARNESS_KEPT, POWER)
# each scenario's truth, as calibration_truths.false_alarm judges outcomes against it
TRUTHS = {REPRODUCIBILITY: "observed", EXCHANGEABLE: "no gap", HARNESS_KEPT: "no gap",
          POWER: "margin"}
MEASURES = {
    REPRODUCIBILITY: "how often the outcome comes back when the grid's items are redrawn: "
                     "the truth is the observed grid, its gap included (reproducibility at "
                     "the observed gap, not a true-positive rate)",
    EXCHANGEABLE: "false alarms with no gap and no harness difference: the pair's rows "
                  "exchanged item by item by a fair coin (one shared profile)",
    HARNESS_KEPT: "false alarms with no reference gap but each model's own harness effects: "
                  "whole robust rows turned so each benchmark's reference gap is 0, every "
                  "model's config-to-config pattern kept exactly",
    POWER: "power at the margin: the same construction with a true reference gap of exactly "
           "m points in the observed direction",
    FAMILY: "over the family of pairs: how often the largest |reference gap| under the "
            "exchangeable null reaches the observed largest (and, per pair, its own)",
}
VERDICTS = ("differs", "one item", "cancel", "identical")  # SPEC §6 v4: `ordered` is `differs`
LABELS = ("stable", "underpowered", "harness-sensitive", "target-sensitive", "unsupported")
_CELL_BUDGET = 40_000_000  # stacked (model, item, config) cells per decide_pairs call
assert set(LABELS) == {"stable", *FLAGS}


def pair_rng(seed: int, a: str, b: str, *extra: int) -> np.random.Generator:
    """A pair's own stream: its replicates do not depend on which other pairs are asked."""
    words = [int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")
             for name in sorted((a, b))]
    return np.random.default_rng([int(seed), STREAM_CALIBRATION, *words, *extra])


def draw_replicates(cube: Cube, replicates: int, rng: np.random.Generator):
    """idx [R, I]: item drawn into each position (within the position's benchmark, cube in
    canonical order); swap [R, I]: the exchangeable null's coin per drawn item."""
    strata = strata_of(cube)
    idx = np.empty((replicates, len(cube.items)), dtype=np.intp)
    for lo, hi in zip(strata.starts.tolist(), strata.stops.tolist()):
        idx[:, lo:hi] = rng.integers(lo, hi, size=(replicates, hi - lo))
    swap = rng.random((replicates, len(cube.items))) < 0.5
    return idx, swap


def scenario_rows(rows_a: np.ndarray, rows_b: np.ndarray, idx: np.ndarray, swap: np.ndarray,
                  exchange: bool) -> tuple[np.ndarray, np.ndarray]:
    """The simulated A and B values [R, I, ...] of any per-(model, item) array (bits,
    presence, class codes) of the two models: gathered by idx, exchanged by swap if asked."""
    a, b = rows_a[idx], rows_b[idx]
    if not exchange:
        return a, b
    s = swap.reshape(swap.shape + (1,) * (a.ndim - 2))
    return np.where(s, b, a), np.where(s, a, b)


def stacked_rows(rows_a: np.ndarray, rows_b: np.ndarray, idx: np.ndarray, swap: np.ndarray,
                 exchange: bool) -> np.ndarray:
    """scenario_rows stacked as [R, 2, I, ...] in one gather (A at 0, B at 1)."""
    both = np.stack([rows_a, rows_b])
    side = np.arange(2)[None, :, None]
    if exchange:
        side = side ^ swap[:, None, :]
    return both[side, idx[:, None, :]]


def simulated_cube(cube: Cube, a: int, b: int, idx, swap, exchange: bool) -> Cube:
    """The replicates of one scenario as one cube: replicate r is models 2r (A) and 2r+1 (B),
    named so that their sorted order is this order (decide_pairs sorts by name)."""
    n = 2 * len(idx)
    shape = (n,) + cube.bits.shape[1:]
    bits = stacked_rows(cube.bits[a], cube.bits[b], idx, swap, exchange).reshape(shape)
    if cube.present[[a, b]].all():
        present = np.broadcast_to(np.True_, shape)  # read-only, no memory
    else:
        present = stacked_rows(cube.present[a], cube.present[b], idx, swap,
                               exchange).reshape(shape)
    return Cube(tuple(f"{k:07d}" for k in range(n)), cube.items, cube.configs, bits, present,
                cube.benchmarks, None, cube.reference)


def _verdict_tally(cube: Cube, cls: Classification, a: int, b: int, idx, swap, exchange):
    codes_a, codes_b = scenario_rows(cls.codes[a], cls.codes[b], idx, swap, exchange)
    ref = cube.reference_index
    bits_a, bits_b = scenario_rows(cube.bits[a, :, ref], cube.bits[b, :, ref], idx, swap,
                                   exchange)
    pres_a, pres_b = scenario_rows(cube.present[a, :, ref], cube.present[b, :, ref], idx, swap,
                                   exchange)
    paired = pres_a & pres_b
    gap = np.count_nonzero(bits_a & paired, axis=1) - np.count_nonzero(bits_b & paired, axis=1)
    a_only = np.count_nonzero((codes_a == ROBUST_CORRECT) & (codes_b == ROBUST_WRONG), axis=1)
    b_only = np.count_nonzero((codes_a == ROBUST_WRONG) & (codes_b == ROBUST_CORRECT), axis=1)
    manufactured = (gap != 0) & (mcnemar_exact_p(a_only, b_only) >= MANUFACTURED_ALPHA)
    verdicts = [verdict(int(x), int(y)) for x, y in zip(a_only.tolist(), b_only.tolist())]
    return gap, verdicts, manufactured


def _label_tally(cube: Cube, cls: Classification, a: int, b: int, idx, swap, exchange, *,
                 n_boot: int, seed: int, margin: float) -> dict:
    """{target: [label per replicate]} from decide_pairs on the stacked replicates, in
    chunks that keep the stacked cube under _CELL_BUDGET cells."""
    per_rep = 2 * len(cube.items) * max(len(cube.configs), 1)
    chunk = max(1, _CELL_BUDGET // per_rep)
    labels = {t: [] for t in TARGETS}
    for start in range(0, len(idx), chunk):
        part = slice(start, start + chunk)
        sim = simulated_cube(cube, a, b, idx[part], swap[part], exchange)
        codes = stacked_rows(cls.codes[a], cls.codes[b], idx[part], swap[part],
                             exchange).reshape(len(sim.models), -1)
        complete = stacked_rows(cls.complete[a], cls.complete[b], idx[part], swap[part],
                                exchange).reshape(codes.shape)
        pairs = list(zip(sim.models[0::2], sim.models[1::2]))
        for d in decide_pairs(sim, pairs, margin=margin, seed=seed, n_boot=n_boot,
                              cls=Classification(codes, complete)):
            labels[d.target].append(d.label)
    return labels


def _counts(values, names) -> dict:
    values = list(values)
    return {n: sum(v == n for v in values) for n in names}


def scenario_truths(cube: Cube, i: int, j: int, margin: float, seed: int):
    """{scenario: (truth pair cube, exchange, shortfall)} for models i, j of a canonical
    cube (in name order). The harness-kept and margin truths turn rows with their own
    seeded streams (calibration_truths.shifted_truth)."""
    pair = truths.pair_cube(cube, i, j)
    n_bench = len(strata_of(pair).names)
    null = truths.shifted_truth(pair, np.zeros(n_bench, dtype=np.int64),
                                pair_rng(seed, *pair.models, 1))
    at_m = truths.shifted_truth(pair, truths.margin_targets(pair, margin),
                                pair_rng(seed, *pair.models, 2))
    return {REPRODUCIBILITY: (pair, False, 0), EXCHANGEABLE: (pair, True, 0),
            HARNESS_KEPT: (null[0], False, null[1]), POWER: (at_m[0], False, at_m[1])}


def calibrate_pair(cube: Cube, a: str, b: str, *, replicates: int = REPLICATES, seed: int = 0,
                   n_boot: int = N_BOOT, margin: float = 2.0) -> dict:
    """Counts for one pair over `replicates` replicates of each scenario (what the cache
    keeps). The pair is simulated in name order, so (A, B) and (B, A) get the same counts;
    `a`, `b` only orient the gaps. cube: canonical (see `calibrate`). Each scenario's truth
    is classified on its own two rows (a turned row changes its class)."""
    first, second = sorted((a, b))
    i, j = cube.models.index(first), cube.models.index(second)
    idx, swap = draw_replicates(cube, replicates, pair_rng(seed, first, second))
    sign = 1 if first == a else -1
    out = {"a": a, "b": b, "replicates": replicates}
    for scenario, (truth, exchange, shortfall) in scenario_truths(cube, i, j, margin,
                                                                  seed).items():
        tcls = classify(truth)
        gap, verdicts, manufactured = _verdict_tally(truth, tcls, 0, 1, idx, swap, exchange)
        labels = _label_tally(truth, tcls, 0, 1, idx, swap, exchange, n_boot=n_boot,
                              seed=seed, margin=margin)
        true_gap = 0.0 if exchange else truths.truth_gap_points(truth)
        out[scenario] = {
            "true_gap_points": None if true_gap is None else sign * true_gap,
            "shortfall_items": shortfall,
            "mean_gap": sign * float(gap.mean()) if replicates else None,
            "verdicts": _counts(verdicts, VERDICTS),
            "manufactured": int(np.count_nonzero(manufactured)),
            "labels": {t: _counts(labels[t], LABELS) for t in TARGETS},
            # the exchangeable truth is the 50/50 mixture: no gap under any config
            "harness_reversal": (dict.fromkeys(TARGETS, False) if exchange
                                 else truths.harness_reversal(truth, margin)),
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
    ranking, A above B, which also get the family line). cached: {pair_key: counts}
    computed earlier with the same cube and settings; the result's `new` holds the counts
    computed now, under the same keys. Pairs and totals carry rates with intervals."""
    from fragility_tui.analysis.pairs import adjacent_pairs

    adjacent = pairs is None
    if adjacent:
        pairs = [(cube.models[i], cube.models[j]) for i, j in adjacent_pairs(cube)]
    canon = canonical(cube)
    cached = dict(cached or {})
    new = {}
    for a, b in pairs:
        key = pair_key(a, b)
        if key not in cached:
            new[key] = cached[key] = calibrate_pair(canon, a, b, replicates=replicates,
                                                    seed=seed, n_boot=n_boot, margin=margin)
    observed = observed_outcomes(canon, pairs, margin=margin, seed=seed)
    counts = [oriented(cached[pair_key(a, b)], a, b) for a, b in pairs]
    rows = [dict(rated(c), observed=obs, adjacent=adjacent) for c, obs in zip(counts, observed)]
    family = family_line(canon, pairs, replicates, seed) if adjacent and pairs else None
    if family is not None:
        for row, exceed in zip(rows, family.pop("per_pair")):
            row["family_exceed"] = exceed
    return {"settings": settings(cube, replicates=replicates, seed=seed, n_boot=n_boot,
                                 margin=margin),
            "scenarios": dict(MEASURES), "pairs": rows, "totals": totals(counts),
            FAMILY: family, "new": new}


def family_line(cube: Cube, pairs, replicates: int, seed: int) -> dict:
    """The family-level check over `pairs` (calibration_truths.family_exceedance)."""
    pos = {m: k for k, m in enumerate(cube.models)}
    rng = np.random.default_rng([int(seed), STREAM_CALIBRATION, 0xFA])
    observed, null_max = truths.family_exceedance(
        cube, [(pos[a], pos[b]) for a, b in pairs], replicates, rng)
    largest = float(observed.max())
    tol = 1e-9  # the gaps are ratios of counts: compare with a tolerance, never rounded
    return {"replicates": replicates, "pairs": len(pairs),
            "observed_largest_gap_points": largest,
            "null_mean_largest_gap_points": float(null_max.mean()) if replicates else None,
            "at_least_observed": rate(int(np.count_nonzero(null_max >= largest - tol)),
                                      replicates),
            "per_pair": [rate(int(np.count_nonzero(null_max >= g - tol)), replicates)
                         for g in observed]}


def is_false_alarm(tally: dict, scenario: str, outcome: str, target: str | None) -> bool:
    """Whether an outcome is an error under this scenario's truth for this pair (never
    under the observed grid, nor where the truth fell short of its gap: not judged)."""
    truth = TRUTHS[scenario] if not tally.get("shortfall_items") else "observed"
    return truths.false_alarm(truth, outcome, target, tally.get("harness_reversal"))


def false_alarm_counts(tally: dict, scenario: str) -> dict | None:
    """{target: replicates whose label is an error under the truth}; None where the
    scenario has no known truth (reproducibility) or fell short of it (not judged)."""
    if TRUTHS[scenario] == "observed" or tally.get("shortfall_items"):
        return None
    return {t: sum(c for x, c in tally["labels"][t].items()
                   if is_false_alarm(tally, scenario, x, t)) for t in TARGETS}


def rated(counts: dict) -> dict:
    """A pair's (or the totals') counts with every count turned into a rate with its
    interval (binomial.rate) out of the replicates; `false_alarms` {target: rate} counts
    only the labels that are errors under the scenario's truth (null for reproducibility)."""
    n = counts["replicates"]
    out = {k: v for k, v in counts.items() if k not in SCENARIOS}
    for scenario in SCENARIOS:
        tally = counts[scenario]
        alarms = (tally["false_alarm_counts"] if "false_alarm_counts" in tally
                  else false_alarm_counts(tally, scenario))
        judged = tally.get("judged_replicates", n)
        out[scenario] = dict(
            {k: v for k, v in tally.items() if k not in ("false_alarm_counts",
                                                         "judged_replicates")},
            verdicts={v: rate(c, n) for v, c in tally["verdicts"].items()},
            manufactured=rate(tally["manufactured"], n),
            labels={t: {x: rate(c, n) for x, c in tally["labels"][t].items()}
                    for t in TARGETS},
            false_alarms=None if alarms is None else {t: rate(c, judged)
                                                      for t, c in alarms.items()})
    return out


def totals(counts: list[dict]) -> dict:
    """Each scenario's counts summed over the pairs (replicates × pairs draws), as rates:
    pooled over the pairs' truths, which differ (`true_gaps_points`, one per pair; false
    alarms are judged per pair against its own truth before they are summed)."""
    out = {"replicates": sum(r["replicates"] for r in counts)}
    for scenario in SCENARIOS:
        alarms = [(false_alarm_counts(r[scenario], scenario), r["replicates"]) for r in counts]
        judged = [(a, n) for a, n in alarms if a is not None]
        out[scenario] = {
            "true_gaps_points": [r[scenario]["true_gap_points"] for r in counts],
            # over the pairs whose truth is judged (not reproducibility, no shortfall)
            "false_alarm_counts": {t: sum(a[t] for a, _ in judged) for t in TARGETS}
            if judged else None,
            "judged_replicates": sum(n for _, n in judged),
            "shortfall_items": sum(r[scenario]["shortfall_items"] for r in counts),
            "verdicts": {v: sum(r[scenario]["verdicts"][v] for r in counts) for v in VERDICTS},
            "manufactured": sum(r[scenario]["manufactured"] for r in counts),
            "labels": {t: {x: sum(r[scenario]["labels"][t][x] for r in counts) for x in LABELS}
                       for t in TARGETS}}
    return rated(out)


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
            "margin_points": float(margin), "interval": INTERVAL_NAME}


def cache_key(cube: Cube, config: dict) -> str:
    """One key per (grid content, reference, replicates, seed, bootstrap, margin, method)."""
    return hashlib.sha256(json.dumps([cube_digest(cube), config], sort_keys=True)
                          .encode()).hexdigest()


def oriented(result: dict, a: str, b: str) -> dict:
    """A pair's counts (as cached, for either order) oriented as A above B."""
    if (result["a"], result["b"]) == (a, b):
        return result
    out = dict(result, a=a, b=b)
    for scenario in SCENARIOS:
        tally = result[scenario]
        out[scenario] = dict(tally, **{k: None if tally[k] is None else -tally[k]
                                       for k in ("mean_gap", "true_gap_points")})
    return out


def share(result: dict, scenario: str, outcome: str, target: str | None = None) -> dict:
    """The rate (binomial.rate: count, n, rate, ci_low, ci_high) of a scenario's replicates
    with this outcome: a verdict, 'manufactured', or (with target) a decision label."""
    tally = result[scenario]
    if target is not None:
        return tally["labels"][target][outcome]
    if outcome == "manufactured":
        return tally["manufactured"]
    return tally["verdicts"][outcome]


# the null each pane line quotes beside reproducibility: a verdict (Pairs) reads the stable
# set, whose natural null is the exchangeable one (the exact McNemar test's); the harness-
# kept truth moves the reference level through robust rows, which gives its stable set a
# counter-gap, so it is quoted for labels (Compare), which read per-config accuracies
NULL_FOR_VERDICTS, NULL_FOR_LABELS = EXCHANGEABLE, HARNESS_KEPT
_NULL_WORDS = {  # (long, medium, short) name of each quoted null
    EXCHANGEABLE: ("with no gap, rows exchanged", "no gap, exchangeable", "no gap+exch."),
    HARNESS_KEPT: ("with no gap, harness kept", "no gap, harness kept", "no gap+harness"),
}


def quoted_scenarios(target: str | None) -> tuple[str, str]:
    """The two scenarios a pane line quotes: reproducibility and the outcome's null."""
    return REPRODUCIBILITY, NULL_FOR_VERDICTS if target is None else NULL_FOR_LABELS


def summary_line(result: dict, outcome: str, target: str | None = None,
                 width: int = 78) -> str:
    """The panes' one line: how often the outcome comes out at the observed gap
    (reproducibility) and under a null (a verdict: exchangeable rows; a label: no gap with
    the harness kept), each scenario named; the longest wording that fits `width` (the
    shortest fits 78 columns for every outcome and target name, up to 9,999 replicates)."""
    first, second = quoted_scenarios(target)
    rep, null = share(result, first, outcome, target), share(result, second, outcome, target)
    long, medium, short = _NULL_WORDS[second]
    pct = lambda r: "–" if r["rate"] is None else f"{100 * r['rate']:.0f}%"  # noqa: E731
    ci = lambda r: "" if r["rate"] is None else (  # noqa: E731
        " " + interval(100 * r["ci_low"], 100 * r["ci_high"], 0))
    n = result["replicates"]
    what = f"'{outcome}'" if target is None else f"{target} '{outcome}'"
    # "false alarms" only where the outcome is an error under that null's truth
    alarm = " (false alarms)" if is_false_alarm(result[second], second, outcome, target) else ""
    variants = [
        f"calibration ({n} replicates): {what} {pct(rep)}{ci(rep)} reproduced at the observed "
        f"gap; {pct(null)}{ci(null)} {long}{alarm}",
        f"calibration ({n} replicates): {what} {pct(rep)} reproduced at the observed gap, "
        f"{pct(null)} {long}",
        f"calib. {n} reps: {what} {pct(rep)} at the observed gap, {pct(null)} {medium}",
        f"{n} reps: {what} {pct(rep)} at observed gap, {pct(null)} {medium}",
        f"{n} reps: {what} {pct(rep)} at obs. gap, {pct(null)} {short}",
    ]
    return next((v for v in variants if len(v) <= width), variants[-1])
