"""`fragility-tui selfcheck decisions`: the SPEC §9 controlled check, printed with Wilson
intervals; exit 1 when a scenario's modal label is not its known state."""

from __future__ import annotations

import sys

from fragility_tui.commands.report import add_resampling_options
from fragility_tui.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("selfcheck", help="controlled checks of the analysis (decisions)")
    p.add_argument("check", choices=["decisions"],
                   help="decisions: simulated pairs with known state must get that label")
    p.add_argument("--replicates", type=int, default=300, metavar="N",
                   help="replicates per scenario (default 300, at least 300 for the SPEC check)")
    add_resampling_options(p, boot=1000)


def run(args) -> int:
    from fragility_tui.analysis.controlled import run_check

    if args.replicates < 1:
        raise InputError(f"must be at least 1, got {args.replicates}", field="--replicates")
    if args.boot < 1:
        raise InputError(f"must be at least 1, got {args.boot}", field="--boot")
    results = run_check(replicates=args.replicates, seed=args.seed, n_boot=args.boot)
    out = [f"controlled check of decisions (SPEC 9): {args.replicates} replicates per scenario, "
           f"{args.boot} bootstrap resamples, seed {args.seed}", ""]
    head = (f"{'scenario':<22} {'known state':<18} {'recovered':>9} {'rate':>6}  "
            f"{'95% Wilson':<15} {'modal':<18} point-estimate rule")
    out += [head, "-" * len(head)]
    for r in results:
        lo, hi = r.interval
        out.append(f"{r.scenario:<22} {r.expected:<18} {r.recovered:>9} {100 * r.rate:>5.1f}%  "
                   f"[{100 * lo:5.1f}, {100 * hi:5.1f}]  {r.modal_label:<18} "
                   f"{100 * r.point_estimate_rate:5.1f}%" + ("" if r.passed else "   <- FAIL"))
        others = {k: v for k, v in r.labels.items() if k != r.expected}
        if others:
            listed = ", ".join(f"{k} {v}" for k, v in others.items())
            out.append(" " * 23 + "other labels: " + listed)
    full = sum(r.recovered for r in results) / sum(r.replicates for r in results)
    naive = sum(r.point_estimate_recovered for r in results) / sum(r.replicates for r in results)
    out += ["", f"recovered over all scenarios: the procedure {100 * full:.1f}%, the "
                f"point-estimate-only rule (higher reference accuracy wins) {100 * naive:.1f}%"]
    failed = [r.scenario for r in results if not r.passed]
    out += ["", "all scenarios recovered" if not failed
            else f"FAILED: modal label wrong in {', '.join(failed)}"]
    sys.stdout.write("\n".join(out) + "\n")
    return 1 if failed else 0
