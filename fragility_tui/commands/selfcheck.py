"""`fragility-tui selfcheck decisions`: the SPEC §9 controlled check, the procedure beside a
fair baseline (the same flags on point estimates) on the same simulated pairs, every rate
with a Wilson interval. A checked scenario passes when its error rate's upper 95% bound is
under ERROR_LEVEL (analysis/controlled.py); exit 1 when one fails (its lower bound above
the level). Short by default (seconds, some scenarios undecided); --full for the SPEC-sized
run."""

from __future__ import annotations

import sys
import textwrap

from fragility_tui.commands.flag_checks import check_boot, check_seed
from fragility_tui.commands.report import add_resampling_options
from fragility_tui.errors import InputError

# the default run takes seconds; --full is the SPEC-sized run (minutes on 2 cores)
QUICK = (40, 200)  # replicates per scenario, bootstrap resamples
FULL = (300, 1000)


def register(sub) -> None:
    p = sub.add_parser("selfcheck", help="controlled checks of the analysis (decisions)")
    p.add_argument("check", choices=["decisions"],
                   help="decisions: simulated pairs with known state must get that label")
    p.add_argument("--replicates", type=int, default=None, metavar="N",
                   help=f"replicates per scenario (default {QUICK[0]}; --full: {FULL[0]})")
    p.add_argument("--full", action="store_true",
                   help=f"the SPEC-sized run: {FULL[0]} replicates, {FULL[1]} resamples "
                        "(minutes)")
    add_resampling_options(p, boot=None, boot_default=f"{QUICK[1]}; --full: {FULL[1]}")
    p.set_defaults(boot=None)


def _rate(rate: float, interval) -> str:
    lo, hi = interval
    return f"{100 * rate:5.1f}% [{100 * lo:5.1f}, {100 * hi:5.1f}]"


def run(args) -> int:
    from fragility_tui.analysis.binomial import wilson
    from fragility_tui.analysis.controlled import ERROR_LEVEL, run_check

    sizes = FULL if args.full else QUICK
    replicates = args.replicates if args.replicates is not None else sizes[0]
    boot = args.boot if args.boot is not None else sizes[1]
    if replicates < 1:
        raise InputError(f"must be at least 1, got {replicates}", field="--replicates")
    check_seed(args.seed, "--seed")
    check_boot(boot)
    results = run_check(replicates=replicates, seed=args.seed, n_boot=boot)
    out = [f"controlled check of decisions (SPEC 9): {replicates} replicates per scenario, "
           f"{boot} bootstrap resamples, seed {args.seed}",
           *([] if args.full else [f"(quick run; --full for {FULL[0]} replicates and {FULL[1]} "
                                   "resamples)"]),
           "procedure: SPEC 9 with its intervals; fair baseline: the same flags in the same "
           "order on point",
           "estimates (no intervals). Cells: % of replicates whose label recovers the known "
           "state,",
           "[95% Wilson interval].",
           ""]
    level = f"{100 * ERROR_LEVEL:.0f}%"
    head = (f"{'scenario':<24} {'known state':<17} {'procedure':<22} {'fair baseline':<22} "
            f"check")
    out += [head, "-" * len(head)]
    for r in results:
        out.append(f"{r.scenario:<24} {r.expected:<17} {_rate(r.rate, r.interval):<22} "
                   f"{_rate(r.baseline_rate, r.baseline_interval):<22} {r.outcome}")
        if r.checked:
            low, high = r.error_interval
            out.append(" " * 25 + f"errors {100 * (1 - r.rate):.1f}%, 95% bound "
                       f"[{100 * low:.1f}, {100 * high:.1f}] against {level}")
        for who, labels in (("procedure", r.labels), ("baseline", r.baseline_labels)):
            others = {k: v for k, v in labels.items() if k not in r.recovering}
            if others:
                listed = ", ".join(f"{k} {v}" for k, v in others.items())
                out.append(" " * 25 + f"{who} also: {listed}")
    checked = [r for r in results if r.checked]
    total = sum(r.replicates for r in checked)
    procedure, baseline = (sum(r.recovered for r in checked),
                           sum(r.baseline_recovered for r in checked))
    out += ["", f"recovered over the {len(checked)} checked scenarios ({total} replicates; "
                "power rows left out):",
            f"  the procedure {_rate(procedure / total, wilson(procedure, total))}, "
            f"the fair baseline {_rate(baseline / total, wilson(baseline, total))}",
            f"a checked scenario passes when its error rate's upper 95% bound is under {level},",
            "fails when the lower bound is above it, and is undecided in between (--full);",
            "known state 'no winner': underpowered or harness-sensitive recover it; 'power' "
            "rows (true gap",
            "at or near the margin) report power with its interval: no rule holds power near "
            "100% at the margin"]
    failed = [r.scenario for r in results if r.outcome == "FAIL"]
    undecided = [r.scenario for r in results if r.outcome == "undecided"]
    out += [""]
    if undecided:
        out += textwrap.wrap("undecided (too few replicates to bound the error): "
                             + "; ".join(undecided), 100)
    out.append(f"FAILED: error rate above {level} in {', '.join(failed)}" if failed
               else "every checked scenario passed" if not undecided
               else "no checked scenario failed")
    sys.stdout.write("\n".join(out) + "\n")
    return 1 if failed else 0
