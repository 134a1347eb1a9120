"""`fragility-tui import-lmeval`: lm-evaluation-harness --log_samples output → cells."""

from __future__ import annotations

from fragility_tui.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("import-lmeval",
                       help="import lm-eval --log_samples output of a multiple-choice task")
    p.add_argument("samples", metavar="SAMPLES.jsonl")
    p.add_argument("--model", required=True, metavar="NAME", help="model name in the grid")
    p.add_argument("--config", required=True, metavar="ID",
                   help="config id the cells are recorded under (e.g. cloze_qa)")
    p.add_argument("--metric", default="acc_norm", choices=["acc", "acc_norm"],
                   help="prediction rule: argmax of raw (acc) or length-normalised (acc_norm) "
                        "log-likelihoods (default acc_norm, SPEC §2)")
    p.add_argument("--grid", default="lmeval", metavar="NAME",
                   help="grid to add the cells to (created when absent; default lmeval)")
    p.add_argument("--items", metavar="PATH",
                   help="item file of the task (default: the grid's items, else the docs)")
    p.add_argument("--id-field", default="id", metavar="FIELD",
                   help="doc field holding the item id (default id); content matching otherwise")
    p.add_argument("--replace", action="store_true",
                   help="replace the cells the grid already has of this model and config")
    p.set_defaults(func=cmd_import_lmeval)


def cmd_import_lmeval(args) -> int:
    from fragility_tui.bootstrap import open_store
    from fragility_tui.harness.configs import get_config
    from fragility_tui.store.writer import GridContent, write_grid
    from fragility_tui.store.lmeval import items_from_docs, read_samples, samples_to_cells
    from fragility_tui.store.schema import cell_table

    try:
        scoring = get_config(args.config).scoring
    except KeyError as exc:
        raise InputError(str(exc.args[0]), field="--config") from None
    if scoring != "likelihood":
        raise InputError(f"config {args.config} is not scored by each option's text (its "
                         f"scoring is {scoring}): lm-eval's samples are, so record them under "
                         "cloze_qa or cloze_bare (with modifiers, e.g. cloze_qa+k5), or use "
                         "import-log, which reads the config from the log", field="--config")
    samples = read_samples(args.samples)
    store = open_store(args.db, load_samples=False)
    if args.items:
        from fragility_tui.items.loaders import load_items

        items, _ = load_items(args.items)
    elif store.has_grid(args.grid) and store.load_items(args.grid):
        items = store.load_items(args.grid)
    else:
        items = items_from_docs(samples, args.samples)
    cells, summary = samples_to_cells(samples, items, model=args.model, config=args.config,
                                      metric=args.metric, id_field=args.id_field,
                                      path=args.samples)
    matched = {c.item_uid for c in cells}
    provenance = {"imported_from": args.samples, "metric": args.metric,
                  "harness": "lm-evaluation-harness"}
    written = write_grid(store, GridContent(
        args.grid, [it for it in items if it.item_uid in matched],
        {args.model: (f"lm-eval:{args.samples}", provenance)}, cell_table(args.grid, cells),
        description=f"lm-eval samples from {args.samples}",
        pairs=((args.model, args.config),), replace_existing=args.replace), mode="add")
    print(f"imported {written} cells into grid {args.grid!r} (model {args.model}, config "
          f"{args.config}, {args.metric}): accuracy {summary['accuracy']:.3f}"
          + (f"; agrees with lm-eval's own {args.metric} on {summary['agree_with_lmeval']}/"
             f"{summary['compared_with_lmeval']} items" if summary["compared_with_lmeval"] else ""))
    return 0
