"""`fragility-tui report`: every statistic of SPEC §4–9 on a grid or a selection of it."""

from __future__ import annotations

import json
import sys

from fragility_tui.errors import InputError
from fragility_tui.grid.reference import check_reference, choose_reference
from fragility_tui.harness.configs import REFERENCE, parse_config_list

# compression's random subsets (_check_subsets): 100 times the default draws, and at most
# 10 M item indices in all (the default 1,000 x 100: 100,000; 100,000 draws of 3,000 items
# took 7.1 GB and a minute)
RANDOM_DRAWS_MAX = 100_000
SUBSET_INDICES_MAX = 10_000_000


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def register(sub) -> None:
    p = sub.add_parser("report", help="bands, gap splits, rankings, axes, compression and "
                                      "decisions for a grid (SPEC 4-9)")
    p.add_argument("--grid", required=True, metavar="NAME")
    p.add_argument("--configs", metavar="ID,...",
                   help="configs in view (ids or groups: generate, likelihood, o0..o5, letter, "
                        "paren, digit, instruct; or axis levels: harness=lm-eval,shots=0); "
                        "must include the reference")
    add_reference_option(p)
    p.add_argument("--models", metavar="A,B,...", help="models in view (default: all)")
    p.add_argument("--benchmarks", metavar="B,...", help="benchmarks in view (default: all)")
    p.add_argument("--pair", action="append", default=[], metavar="A,B",
                   help="also split and decide this pair (repeatable)")
    p.add_argument("--target", choices=["observed", "balanced"], default="observed",
                   help="target the text report leads with (JSON holds both)")
    p.add_argument("--margin", type=float, default=2.0, metavar="POINTS",
                   help="practical margin m in accuracy points, at least 0 and below 100 "
                        "(default 2)")
    add_resampling_options(p, boot=2000)
    p.add_argument("--k", type=int, default=100, metavar="K", help="compression size (default 100)")
    p.add_argument("--random-draws", type=int, default=1000, metavar="N",
                   help=f"random subsets for compression (default 1000), at most "
                        f"{RANDOM_DRAWS_MAX:,}, and N x K at most {SUBSET_INDICES_MAX:,} "
                        "(K: --k or the items in view if fewer; the subsets are N x K item "
                        "indices)")
    p.add_argument("--discrimination", choices=["item-total", "irt"], default="item-total",
                   help="item discrimination behind r, top-k and compression: corrected "
                        "item-total correlation (default) or 2PL IRT slope (SPEC 8)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the report as JSON")
    fmt.add_argument("--markdown", action="store_true", help="print Markdown tables")


def add_reference_option(parser) -> None:
    parser.add_argument("--reference", metavar="CONFIG",
                        help=f"config every figure is measured against (default {REFERENCE} "
                             "when the grid has it, else the grid's first config in canonical "
                             "order, e.g. cloze_qa for a grid imported from lm-eval)")


def add_resampling_options(parser, *, boot: int | None, boot_default: str | None = None) -> None:
    """--seed and --boot, shared by every command that bootstraps (checked by
    check_resampling). boot_default: what the help says the default is, where it depends on
    other flags (boot is then None)."""
    from fragility_tui.commands.flag_checks import BOOT_HELP, SEED_HELP

    parser.add_argument("--seed", type=int, default=0,
                        help=f"random seed (default 0), {SEED_HELP}")
    parser.add_argument("--boot", type=int, default=boot, metavar="N",
                        help=f"bootstrap resamples (default {boot_default or boot}), {BOOT_HELP}")


def check_resampling(args) -> None:
    """add_resampling_options' --seed and --boot (commands/flag_checks.py), before any
    store or array is touched."""
    from fragility_tui.commands.flag_checks import check_boot, check_seed

    check_seed(args.seed, "--seed")
    check_boot(args.boot)


def select_view(cube, args):
    """Apply --reference and --configs/--models/--benchmarks; bad names become InputError
    naming the flag."""
    from fragility_tui.commands.flag_checks import check_listed

    cube = choose_reference(cube, getattr(args, "reference", None))
    for flag in ("configs", "models", "benchmarks"):
        check_listed(getattr(args, flag, None), f"--{flag}")
    configs = None
    if args.configs is not None and "=" in args.configs:  # axis=level[,axis=level…]
        from fragility_tui.harness.config_axes import select_by_axes

        try:
            configs = select_by_axes(args.configs.replace(",", " "), cube.configs, cube.axes)
        except ValueError as exc:
            raise InputError(str(exc), field="--configs") from None
        if not configs:
            raise InputError("no config matches every axis level given", field="--configs")
        check_reference(cube.reference, configs, field="--configs",
                        hint="--reference picks another")
    elif args.configs is not None:
        try:
            wanted = parse_config_list(args.configs, any_id=True)
        except ValueError as exc:
            raise InputError(str(exc), field="--configs") from None
        explicit = [t for t in _split(args.configs) if t in wanted]
        missing = [c for c in explicit if c not in cube.configs]
        if missing:
            raise InputError(f"config(s) {', '.join(missing)} have no cells in this grid; "
                             f"it has {', '.join(cube.configs)}", field="--configs")
        configs = [c for c in wanted if c in cube.configs]
        check_reference(cube.reference, configs, field="--configs",
                        hint="--reference picks another")
    models = _split(args.models)
    benchmarks = _split(args.benchmarks)
    for flag, names, known in (("--models", models, cube.models),
                               ("--benchmarks", benchmarks, set(map(str, cube.benchmarks)))):
        unknown = [n for n in names or [] if n not in known]
        if unknown:
            raise InputError(f"unknown name(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(known))}", field=flag)
        if names is not None and not names:
            raise InputError("empty list", field=flag)
    if configs is None and models is None and benchmarks is None:
        return cube  # the whole grid: select() would copy every array (52 M cells: ~0.3 s)
    return cube.select(configs=configs, models=models, benchmarks=benchmarks)


def parse_pairs(texts: list[str], models) -> list[tuple[str, str]]:
    pairs = []
    for text in texts:
        names = [t.strip() for t in text.split(",")]
        if len(names) != 2 or not all(names):
            raise InputError(f"expected two model names as A,B, got {text!r}", field="--pair")
        unknown = [n for n in names if n not in models]
        if unknown:
            raise InputError(f"unknown model(s) {', '.join(unknown)} in {text!r} "
                             "(not in the grid or not in --models); known: "
                             f"{', '.join(sorted(models))}", field="--pair")
        if names[0] == names[1]:
            raise InputError(f"pair {text!r} names the same model twice", field="--pair")
        pairs.append((names[0], names[1]))
    return pairs


def _check_counts(args) -> None:
    from fragility_tui.commands.flag_checks import check_count, check_margin, check_minimum

    check_resampling(args)
    check_minimum(args.k, "--k", 1)
    check_count(args.random_draws, "--random-draws", 1, RANDOM_DRAWS_MAX,
                "each draw is a row of K item indices")
    check_margin(args.margin)


def _check_subsets(args, items: int) -> None:
    """Compression's random subsets are [--random-draws, K] item indices (int64, stacked and
    sorted: two copies), K = --k or every item in view if fewer (then one draw is the whole
    view): bounded before they are drawn, once the view's size is known."""
    k = min(args.k, items)
    if k < items and args.random_draws * k > SUBSET_INDICES_MAX:
        raise InputError(f"--random-draws {args.random_draws:,} subsets of --k {k:,} items "
                         f"are {args.random_draws * k:,} item indices; at most "
                         f"{SUBSET_INDICES_MAX:,} (8 bytes each, held in several copies): "
                         f"lower --random-draws to {SUBSET_INDICES_MAX // k:,} or less, or --k",
                         field="--random-draws")


def run(args) -> int:
    from fragility_tui.services.reports import grid_report, report_inputs, store_session
    from fragility_tui.bootstrap import open_store

    _check_counts(args)
    store = open_store(args.db, session=True)
    with store_session(store):  # every read on one connection, released before the analysis
        cube = select_view(store.load_cube(args.grid), args)
        if not cube.models or not cube.items:
            raise InputError("the selection holds no models or no items", field="--grid")
        _check_subsets(args, len(cube.items))
        pairs = parse_pairs(args.pair, cube.models)
        inputs = report_inputs(store, args.grid, cube)
    report = grid_report(store, args.grid, cube=cube, inputs=inputs, target=args.target,
                         margin=args.margin, seed=args.seed, pairs=pairs, n_boot=args.boot,
                         k=args.k, n_random=args.random_draws,
                         discrimination=args.discrimination)
    details = []
    if pairs:  # imported only when asked for (the command's start-up is part of its time)
        from fragility_tui.analysis.pair_detail import pair_detail

        details = [pair_detail(cube, a, b, report.grid.configs) for a, b in pairs]
    if args.json:
        doc = report.to_json()
        if details:  # a key of its own: the report's keys stay as they are
            doc["pair_details"] = [d.to_json() for d in details]
        text = json.dumps(doc, indent=2, allow_nan=False)
    elif args.markdown:
        from fragility_tui.analysis.report_text import render_markdown

        text = render_markdown(report) + markdown_sections(pair_sections(details))
    else:
        from fragility_tui.analysis.report_text import render_sections, render_text

        width, fit = text_width(), sys.stdout.isatty()  # piped: a script reads every cell
        text = render_text(report, width, fit)
        if details:
            text = text.rstrip("\n") + "\n\n" + render_sections(pair_sections(details),
                                                                width, fit)
    sys.stdout.write(text.rstrip("\n") + "\n")
    return 0


def pair_sections(details) -> list:
    """Each named pair under every config in view: both accuracies and the items only one
    of them gets right (analysis/pair_detail.py)."""
    from fragility_tui.analysis.report_text import Section

    pct = lambda x: "-" if x is None else f"{100 * x:.1f}"  # noqa: E731
    secs = []
    for d in details:
        ref = d.at_reference
        secs.append(Section(
            f"Pair {d.a} vs {d.b}: accuracy % and items only one gets right",
            headers=["config", "A %", "B %", "paired", "only A", "only B", "A-B"],
            rows=[[c.config + (" (ref)" if c.config == d.reference else ""),
                   pct(c.accuracy_a), pct(c.accuracy_b), c.paired_items, c.only_a, c.only_b,
                   f"{c.only_a - c.only_b:+d}"] for c in d.configs],
            notes=[f"A = {d.a}, B = {d.b}",
                   f"at the reference {d.reference}: A {pct(ref.accuracy_a)}%, B "
                   f"{pct(ref.accuracy_b)}%; {ref.only_a} items only A gets right, "
                   f"{ref.only_b} only B, of {ref.paired_items} both answered",
                   "accuracy over each model's present cells; only A / only B and A-B (items) "
                   "over the items both have (--json pair_details)"]))
    return secs


def markdown_sections(sections) -> str:
    """Sections as Markdown tables (after the report's own)."""
    from fragility_tui.text import clean

    cell = lambda v: clean(str(v), limit=500, one_line=True).replace(  # noqa: E731
        "\\", "\\\\").replace("|", "\\|")
    out = []
    for sec in sections:
        out += ["", f"### {cell(sec.title)}", "",
                "| " + " | ".join(cell(h) for h in sec.headers) + " |",
                "|" + "|".join("---" for _ in sec.headers) + "|",
                *("| " + " | ".join(cell(v) for v in r) + " |" for r in sec.rows), "",
                *(f"- {cell(n)}" for n in sec.notes)]
    return "\n".join(out)


def text_width() -> int:
    """The terminal's width when stdout is one (at least 80), else TEXT_WIDTH (100): prose
    wraps to it, and on a terminal tables are laid out for it (never cut)."""
    import shutil

    from fragility_tui.analysis.report_text import TEXT_WIDTH

    if not sys.stdout.isatty():
        return TEXT_WIDTH
    return max(80, shutil.get_terminal_size((TEXT_WIDTH, 24)).columns)
