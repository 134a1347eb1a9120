"""`fragility-tui harnesses --grid G --model M`: one model under several harnesses' configs
of the same items: each harness's accuracy on the items all of them scored, the items they
disagree on (which configs get each right), and the harness axis's preserved fraction."""

from __future__ import annotations

import json

from fragility_tui.errors import InputError


def register(sub) -> None:
    from fragility_tui.commands.report import add_reference_option

    p = sub.add_parser("harnesses", help="one model under several harnesses' configs: "
                                         "accuracy, agreement and the items they disagree on")
    p.add_argument("--grid", required=True, metavar="NAME")
    p.add_argument("--model", required=True, metavar="NAME")
    add_reference_option(p)
    p.add_argument("--show", type=int, default=10, metavar="N",
                   help="disagreeing items listed in text, 0 (none) or more (default 10; "
                        "--json lists all)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_harnesses)


def cmd_harnesses(args) -> int:
    from fragility_tui.analysis.axes import preserved_fractions
    from fragility_tui.analysis.harnesses import harness_view
    from fragility_tui.bootstrap import open_store
    from fragility_tui.commands.flag_checks import check_minimum
    from fragility_tui.grid.reference import choose_reference
    from fragility_tui.text import clean

    check_minimum(args.show, "--show", 0, "0 (none) or more")  # -1 sliced off the last item
    store = open_store(args.db, load_samples=False)
    cube = choose_reference(store.load_cube(args.grid), args.reference)
    try:
        view = harness_view(cube, args.model)
    except ValueError as exc:
        raise InputError(str(exc), field="--model") from None
    preserved = preserved_fractions(cube.select(models=[args.model])).get("harness")
    preserved = None if preserved is None or preserved[0] != preserved[0] else float(preserved[0])
    if args.json:
        print(json.dumps({**view.to_json(), "reference": cube.reference,
                          "harness_preserved_fraction": preserved}, indent=2))
        return 0
    print(clean(f"{args.model} on {args.grid}: {len(view.harnesses)} harnesses, "
                f"{view.items} items scored under all their configs (reference "
                f"{cube.reference})", one_line=True))
    width = max((len(c) for a in view.accuracy.values() for c in a), default=0)
    for harness, accuracies in view.accuracy.items():  # the % column aligned on the longest id
        for config, accuracy in accuracies.items():
            print(clean(f"  {harness:<16} {config:<{width}} {100 * accuracy:5.1f}%",
                        one_line=True))
    print(f"every config right: {view.agree_right} · every config wrong: {view.agree_wrong} · "
          f"they disagree: {view.disagree}")
    print("harness axis, preserved fraction of reference-correct (SPEC 7): "
          + ("-" if preserved is None else f"{preserved:.2f}")
          + ("" if preserved is not None else " (no config differs from the reference in "
             "harness alone; see docs/imports.md)"))
    shown = list(view.right_under.items())[:args.show]
    for item, right in shown:
        print(clean(f"  {item}: right under {', '.join(right) or 'none'}", one_line=True))
    if len(view.right_under) > len(shown):
        print(f"  … {len(view.right_under) - len(shown)} more items they disagree on "
              f"(--show N lists N, --json all)")
    return 0
