"""`fragility-tui calibrate`: how often each adjacent pair's verdict and decision label come
out under four named scenarios — reproducibility at the observed gap, false alarms under
two nulls (exchangeable rows; no reference gap with the harness effects kept) and power at
the margin — plus the family line over all adjacent pairs (analysis/calibration.py), every
rate with its 95% Wilson interval, cached per grid."""

from __future__ import annotations

import json
import sys

from fragility_tui.commands.report import add_reference_option, parse_pairs
from fragility_tui.errors import InputError


# analysis.calibration's REPLICATES and N_BOOT (a test keeps them equal): numpy is not
# imported just to build the parser
REPLICATES, N_BOOT = 200, 500


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="how often each pair's verdict and label come out: "
                                         "reproducibility, false alarms under two nulls, "
                                         "power at the margin (simulated)")
    p.add_argument("--grid", required=True, metavar="NAME")
    add_reference_option(p)
    p.add_argument("--replicates", type=int, default=REPLICATES, metavar="N",
                   help=f"simulated grids per scenario and pair (default {REPLICATES})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--boot", type=int, default=N_BOOT, metavar="N",
                   help=f"bootstrap resamples behind each simulated label (default {N_BOOT})")
    p.add_argument("--pair", action="append", default=[], metavar="A,B",
                   help="calibrate this pair instead of the adjacent ones (repeatable)")
    p.add_argument("--json", action="store_true", help="print the rates (count, rate, ci_low, ci_high) as JSON")


def run(args) -> int:
    from fragility_tui.bootstrap import open_store
    from fragility_tui.grid.reference import choose_reference
    from fragility_tui.services.reports import grid_calibration

    for flag, value in (("--replicates", args.replicates), ("--boot", args.boot)):
        if value < 1:
            raise InputError(f"must be at least 1, got {value}", field=flag)
    store = open_store(args.db)
    cube = choose_reference(store.load_cube(args.grid), args.reference)
    pairs = parse_pairs(args.pair, cube.models) or None
    result = grid_calibration(store, args.grid, cube=cube, pairs=pairs,
                              replicates=args.replicates, seed=args.seed, n_boot=args.boot)
    text = json.dumps(result, indent=2, allow_nan=False) if args.json else render_text(result)
    sys.stdout.write(text + "\n")
    return 0


# column heads of the scenarios in the text tables (the JSON uses the full keys)
SHORT = {"reproducibility_at_observed_gap": "repro", "false_alarms_exchangeable": "exch.",
         "false_alarms_harness_kept": "harness", "power_at_margin": "at m"}


def sections(result: dict) -> list:
    from fragility_tui.analysis.calibration import POWER, SCENARIOS
    from fragility_tui.analysis.calibration_result import CalibrationResult
    from fragility_tui.analysis.decisions import TARGETS
    from fragility_tui.analysis.report_text import Section
    from fragility_tui.harness.configs import REFERENCE

    r = CalibrationResult.from_json(result)
    which = "adjacent pairs" if all(p.adjacent for p in r.pairs) else "named pairs"
    m = f"{r.margin_points:g}"
    stand_in = ([] if r.reference == REFERENCE else [
        f"reference {r.reference} stands in for SPEC's {REFERENCE}: every verdict is "
        "measured against it"])
    secs = [Section(f"Verdict calibration of grid {r.grid} (reference {r.reference})", notes=[
        *stand_in,
        f"{r.replicates} replicates per scenario and pair, {len(r.pairs)} {which}",
        f"each simulated label from {r.n_boot} bootstrap resamples (report: 2000), margin "
        f"{m} points, seed {r.seed}",
        "every rate has a 95% Wilson interval (in --json: ci_low, ci_high; here in the totals)",
        "scenarios (docs/spec.md, 'Verdict calibration'); all redraw each benchmark's items "
        "with replacement:",
        "  repro   reproducibility at the observed gap: the truth is the observed grid",
        "          (how often the outcome comes back, not a true-positive rate)",
        "  exch.   false alarms, exchangeable rows: the pair's rows swapped by a coin per "
        "item, no gap",
        "  harness false alarms, no reference gap, harness kept: whole robust rows turned, "
        "each model's",
        "          config-to-config pattern kept exactly",
        f"  at m    power at the margin: the same construction with a true gap of {m} points",
        "cells: % of replicates giving the pair's own observed outcome in each scenario"])]
    short = [SHORT[x] for x in SCENARIOS]
    secs.append(Section(
        "Gap-split verdicts (SPEC 6): the pair's verdict, or manufactured",
        headers=["A", "B", "gap", "outcome", *short],
        rows=[[p.a, p.b, p.observed.gap, p.observed.outcome,
               *(p.scenarios[x].share(p.observed.outcome).percent() for x in SCENARIOS)]
              for p in r.pairs]))
    for t in TARGETS:
        secs.append(Section(
            f"Decision labels at {r.reference}, {t} target (SPEC 9)",
            headers=["A", "B", "label", *short, "stable@m"],
            rows=[[p.a, p.b, p.observed.labels[t],
                   *(p.scenarios[x].share(p.observed.labels[t], t).percent() for x in SCENARIOS),
                   p.scenarios[POWER].share("stable", t).percent()] for p in r.pairs],
            notes=["stable@m: power at the margin, % of replicates labelled stable with a "
                   f"true gap of {m} points"]))
    if r.pairs:
        secs.append(Section(
            f"Over the {len(r.pairs)} pairs ({r.total_replicates} replicates a scenario, "
            "observed target)",
            headers=["scenario", "stable", "underpowered", "harness-sens.", "manufactured"],
            rows=[[x, *(r.totals[x].share(lab, "observed").with_interval()
                        for lab in ("stable", "underpowered", "harness-sensitive")),
                   r.totals[x].manufactured.with_interval()] for x in SCENARIOS],
            notes=[f"cache: {r.pairs_reused} pairs reused, {r.pairs_computed} computed"]))
    if r.family:
        f = r.family
        secs.append(Section("Family of adjacent pairs (exchangeable null)", notes=[
            f"largest adjacent |gap| observed: {f.observed_largest_gap_points:.2f} "
            f"points; the null's largest averages {f.null_mean_largest_gap_points:.2f}",
            f"the null's largest reaches the observed one in "
            f"{f.at_least_observed.with_interval(1)} of {f.replicates} replicates "
            f"(family-wise p)",
            "per pair (--json pairs[].family_exceed): the null's largest reaches that pair's "
            "own |gap|"]))
    return secs


def render_text(result: dict) -> str:
    from fragility_tui.analysis.report_text import render_sections
    from fragility_tui.commands.report import text_width

    return render_sections(sections(result), text_width()).rstrip("\n")
