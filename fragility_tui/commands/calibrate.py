"""`fragility-tui calibrate`: how often each adjacent pair's verdict and decision label come
out when its gap is real and when there is none (analysis/calibration.py), cached per grid."""

from __future__ import annotations

import json
import sys

from fragility_tui.commands.report import add_reference_option, parse_pairs
from fragility_tui.errors import InputError


# analysis.calibration's REPLICATES and N_BOOT (a test keeps them equal): numpy is not
# imported just to build the parser
REPLICATES, N_BOOT = 200, 500


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="how often each pair's verdict and label come out "
                                         "with a real gap and with none (simulated)")
    p.add_argument("--grid", required=True, metavar="NAME")
    add_reference_option(p)
    p.add_argument("--replicates", type=int, default=REPLICATES, metavar="N",
                   help=f"simulated grids per scenario and pair (default {REPLICATES})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--boot", type=int, default=N_BOOT, metavar="N",
                   help=f"bootstrap resamples behind each simulated label (default {N_BOOT})")
    p.add_argument("--pair", action="append", default=[], metavar="A,B",
                   help="calibrate this pair instead of the adjacent ones (repeatable)")
    p.add_argument("--json", action="store_true", help="print the tallies as JSON")


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


def _pcts(result: dict, outcome: str, target: str | None = None) -> str:
    from fragility_tui.analysis.calibration import share

    real, none = (share(result, s, outcome, target) for s in ("real", "none"))
    return f"{100 * real:.0f}/{100 * none:.0f}"


def sections(result: dict) -> list[dict]:
    from fragility_tui.analysis.calibration import LABELS, VERDICTS
    from fragility_tui.analysis.decisions import TARGETS
    from fragility_tui.harness.configs import REFERENCE

    s, pairs = result["settings"], result["pairs"]
    which = "adjacent pairs" if all(p["adjacent"] for p in pairs) else "named pairs"
    secs = [{"title": f"Verdict calibration of grid {result['grid']} (reference "
                      f"{s['reference']})", "notes": [
        f"{s['replicates']} replicates per scenario and pair, {len(pairs)} {which}",
        f"each simulated label from {s['n_boot']} bootstrap resamples (report: 2000), margin "
        f"{s['margin_points']:g} points, seed {s['seed']}",
        "real gap: each benchmark's items redrawn with replacement, both models' rows with "
        "them:",
        "  the observed grid is the truth, so the true gap is the observed one",
        "no gap: the same draws with the two rows of each item swapped by a coin: one shared "
        "profile,",
        "  true gap 0 (docs/spec.md, 'Verdict calibration')",
        "cells: % of replicates with that outcome, with a real gap/with none; label columns: "
        "stable,",
        "  underpowered, harness-sensitive, target-sensitive, unsupported (SPEC 9)"]}]
    if s["reference"] != REFERENCE:
        secs[0]["notes"].insert(0, f"reference {s['reference']} stands in for SPEC's "
                                   f"{REFERENCE}: every verdict is measured against it")
    secs.append({
        "title": "Gap-split verdicts (SPEC 6)",
        "headers": ["A", "B", "gap", "verdict", "man", *VERDICTS, "manuf."],
        "rows": [[p["a"], p["b"], p["observed"]["gap"], p["observed"]["verdict"],
                  "yes" if p["observed"]["manufactured"] else "no",
                  *(_pcts(p, v) for v in VERDICTS), _pcts(p, "manufactured")] for p in pairs]})
    short = {"underpowered": "underpow", "harness-sensitive": "harness",
             "target-sensitive": "target", "unsupported": "unsupp"}  # names stay uncut
    for t in TARGETS:
        secs.append({
            "title": f"Decision labels at {s['reference']}, {t} target (SPEC 9)",
            "headers": ["A", "B", "label", *(short.get(x, x) for x in LABELS)],
            "rows": [[p["a"], p["b"], p["observed"]["labels"][t],
                      *(_pcts(p, x, t) for x in LABELS)] for p in pairs]})
    tot = result["totals"]
    if pairs:
        secs[-1]["notes"] = [
            f"over the {len(pairs)} pairs ({tot['replicates']} replicates a scenario), real "
            f"gap/no gap: manufactured {_pcts(tot, 'manufactured')}%,",
            f"  stable {_pcts(tot, 'stable', 'observed')}%, underpowered "
            f"{_pcts(tot, 'underpowered', 'observed')}%, harness-sensitive "
            f"{_pcts(tot, 'harness-sensitive', 'observed')}% (observed target)",
            f"cache: {result['cache']['pairs_reused']} pairs reused, "
            f"{result['cache']['pairs_computed']} computed"]
    return secs


def render_text(result: dict) -> str:
    from fragility_tui.analysis.report import render_sections

    return render_sections(sections(result)).rstrip("\n")
