"""`fragility-tui calibrate`: how often each adjacent pair's verdict and decision label come
out under four named scenarios — reproducibility at the observed gap, false alarms under
two nulls (exchangeable rows; no reference gap with the harness effects kept) and power at
the margin — plus the family line over all adjacent pairs (analysis/calibration.py), every
rate with its 95% Wilson interval, cached per grid."""

from __future__ import annotations

import json
import sys

from fragility_tui.commands.flag_checks import BOOT_HELP, SEED_HELP, check_count
from fragility_tui.commands.report import add_reference_option, check_resampling, parse_pairs


# analysis.calibration's REPLICATES and N_BOOT (a test keeps them equal): numpy is not
# imported just to build the parser
REPLICATES, N_BOOT = 200, 500
# A pair's replicates are drawn at once: [replicates, items] resampled item indices (int64),
# swaps and each scenario's rows, ~14 bytes a replicate and item (10,000 replicates of one
# pair of a 3,679-item grid: 0.5 GB more than the default, and 9 minutes on 2 cores); 50
# times the default, a rate's 95% interval is within ±1 point.
REPLICATES_MAX = 10_000


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="how often each pair's verdict and label come out: "
                                         "reproducibility, false alarms under two nulls, "
                                         "power at the margin (simulated)")
    p.add_argument("--grid", required=True, metavar="NAME")
    add_reference_option(p)
    p.add_argument("--replicates", type=int, default=REPLICATES, metavar="N",
                   help=f"simulated grids per scenario and pair (default {REPLICATES}), at "
                        f"most {REPLICATES_MAX:,}: each holds a row of item indices")
    p.add_argument("--seed", type=int, default=0, help=f"random seed (default 0), {SEED_HELP}")
    p.add_argument("--boot", type=int, default=N_BOOT, metavar="N",
                   help=f"bootstrap resamples behind each simulated label (default {N_BOOT}), "
                        f"{BOOT_HELP}")
    p.add_argument("--pair", action="append", default=[], metavar="A,B",
                   help="calibrate this pair instead of the adjacent ones (repeatable)")
    p.add_argument("--json", action="store_true", help="print the rates (count, rate, ci_low, ci_high) as JSON")


def run(args) -> int:
    from fragility_tui.bootstrap import open_store
    from fragility_tui.grid.reference import choose_reference
    from fragility_tui.services.reports import grid_calibration

    check_count(args.replicates, "--replicates", 1, REPLICATES_MAX,
                "each replicate holds a row of resampled item indices")
    check_resampling(args)
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


def _gap(points) -> str:
    """A true gap in points, signed ('+1.3', '0', '–' when undefined)."""
    if points is None:
        return "–"
    return "0" if abs(points) < 0.05 else f"{points:+.1f}"  # ASCII minus: text output (issue 60)


def _gaps(points: tuple) -> str:
    """The pooled truths' gaps: one value, or their range."""
    known = [g for g in points if g is not None]
    if not known:
        return "–"
    lo, hi = min(known), max(known)
    return _gap(lo) if _gap(lo) == _gap(hi) else f"{_gap(lo)}…{_gap(hi)}"


def _cell(p, scenario: str, outcome: str, target: str | None = None) -> str:
    """A pair's rate of its own outcome; '*' where that outcome is a false alarm."""
    from fragility_tui.analysis.calibration import is_false_alarm

    tally = p.scenarios[scenario]
    mark = "*" if is_false_alarm(tally.doc, scenario, outcome, target) else ""
    return tally.share(outcome, target).percent() + mark


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
        "  exch.   no gap, exchangeable rows: the pair's rows swapped by a coin per item",
        "  harness no reference gap, harness kept: whole robust rows turned, each model's",
        "          config-to-config pattern kept exactly",
        f"  at m    power at the margin: the same construction aiming at {m} points per "
        "benchmark,",
        "          in whole items: each pair's true gap is in 'True gaps' below",
        "cells: % of replicates giving the pair's own observed outcome in each scenario;",
        "* marks false alarms: that outcome is an error under that scenario's truth (a winner",
        "or a target difference where the truth has none, a harness reversal it does not "
        "hold);",
        "unmarked: a correct call, a miss, or not judged (repro: no known truth)"])]
    short = [SHORT[x] for x in SCENARIOS]
    secs.append(Section(
        f"True gaps of each scenario's truth (A - B, points at {r.reference}, observed target)",
        headers=["A", "B", *short, "harness reversal"], keys=2,
        rows=[[p.a, p.b, *(_gap(p.scenarios[x].true_gap_points) + (
            "†" if p.scenarios[x].doc.get("shortfall_items") else "") for x in SCENARIOS),
               " ".join(SHORT[x] for x in SCENARIOS
                        if p.scenarios[x].doc.get("harness_reversal", {}).get("observed"))
               or "none"] for p in r.pairs],
        notes=["† short of its target gap (too few robust rows to turn; --json "
               "shortfall_items): not judged",
               "harness reversal: in that truth another config's gap is at least m against "
               "the reference's,",
               "so 'harness-sensitive' is correct there and a false alarm elsewhere"]))
    secs.append(Section(
        "Gap-split verdicts (SPEC 6): the pair's verdict, or manufactured",
        headers=["A", "B", "gap", "outcome", *short], keys=2,
        rows=[[p.a, p.b, p.observed.gap, p.observed.outcome,
               *(_cell(p, x, p.observed.outcome) for x in SCENARIOS)] for p in r.pairs],
        notes=["verdicts describe the stable set: 'manufactured' is the correct call where the "
               "truth has no gap"]))
    for t in TARGETS:
        secs.append(Section(
            f"Decision labels at {r.reference}, {t} target (SPEC 9)",
            headers=["A", "B", "label", *short, "stable@m"], keys=2,
            rows=[[p.a, p.b, p.observed.labels[t],
                   *(_cell(p, x, p.observed.labels[t], t) for x in SCENARIOS),
                   p.scenarios[POWER].share("stable", t).percent()] for p in r.pairs],
            notes=["stable@m: power at the margin, % of replicates labelled stable at the "
                   "pair's 'at m' true gap"]))
    if r.pairs:
        secs.append(Section(
            f"Pooled over the {len(r.pairs)} pairs' truths ({r.total_replicates} replicates a "
            "scenario, observed target)",
            headers=["scenario", "true gaps", "stable", "underpowered", "harness-sens.",
                     "false alarms"],
            rows=[[x, _gaps(r.totals[x].true_gaps_points),
                   *(r.totals[x].share(lab, "observed").with_interval()
                     for lab in ("stable", "underpowered", "harness-sensitive")),
                   "–" if r.totals[x].false_alarms is None
                   else r.totals[x].false_alarms["observed"].with_interval()]
                  for x in SCENARIOS],
            notes=["each row sums the pairs' replicates under truths whose gaps span 'true "
                   "gaps';",
                   "false alarms are judged per pair against its own truth; per-truth rates: "
                   "the tables above",
                   f"cache: {r.pairs_reused} pairs reused, {r.pairs_computed} computed"]))
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

    return render_sections(sections(result), text_width(),
                           sys.stdout.isatty()).rstrip("\n")  # piped: a script reads it
