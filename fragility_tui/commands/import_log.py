"""`fragility-tui import-log PATH… --grid NAME`: other harnesses' logs → one grid, each
(model, config) with the config read from the log (SPEC v5 §2b imported configs)."""

from __future__ import annotations

import sys

from fragility_tui.errors import InputError


def register(sub) -> None:
    from fragility_tui.imports import ALIASES, FORMATS

    p = sub.add_parser("import-log", help="import lm-eval, Inspect, lighteval or Every Eval "
                                          "Ever logs into a grid (the config read from the log)")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="log files or folders (lm-eval output, .eval, details parquet, JSONL)")
    p.add_argument("--grid", required=True, metavar="NAME",
                   help="grid to add the cells to (created when absent)")
    p.add_argument("--model", metavar="NAME",
                   help="model name in the grid (default: the name the log gives)")
    p.add_argument("--items", metavar="PATH",
                   help="item file (default: the grid's items, else the logs' own docs)")
    p.add_argument("--format", choices=sorted([*FORMATS, *ALIASES]), metavar="FORMAT",
                   help=f"the logs' format ({', '.join(FORMATS)}); detected by default")
    p.add_argument("--metric", metavar="NAME",
                   help="import only this metric (e.g. acc_norm); default: every metric")
    p.add_argument("--replace", action="store_true",
                   help="replace cells of a (model, config) the grid already has")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_import_log)


def cmd_import_log(args) -> int:
    from fragility_tui.bootstrap import open_store
    from fragility_tui.imports.pipeline import items_from_logs, plan, read_runs
    from fragility_tui.store.log_import import write_log_import

    runs = read_runs(args.paths, args.format, model=args.model, metric=args.metric)
    store = open_store(args.db, load_samples=False)
    items = _items(store, args, runs, items_from_logs)
    planned = plan(runs, items, model=args.model)
    used = {uid for p in planned for uid in p.columns["item_uid"]}
    items = [it for it in items if it.item_uid in used]
    del runs, used  # the samples: what the cells need is in the plan's columns
    written = write_log_import(store, args.grid, planned, items, replace=args.replace)
    return _say(args, planned, written)


def _items(store, args, runs, items_from_logs):
    """--items, plus the grid's items, else the items the logs carry whole."""
    items = []
    if args.items:
        from fragility_tui.items.loaders import load_items

        items, _ = load_items(args.items)
    if store.has_grid(args.grid):
        have = {it.item_uid for it in items}
        items += [it for it in store.load_items(args.grid) if it.item_uid not in have]
    if not items:
        items = items_from_logs(runs)
    if not items:
        raise InputError("no items to match the logs to: the grid has none, the logs carry "
                         "no whole items (question, choices, gold); pass --items",
                         field="--items")
    return items


def _say(args, planned, written: int) -> int:
    from fragility_tui.text import clean

    summary = [{"model": p.model, "config": p.config_id, "source": p.run.source,
                "cells": p.n_cells, "matched": len(p.report.matched),
                "unmatched": len(p.report.unmatched), "ambiguous": len(p.report.ambiguous),
                "accuracy": p.accuracy, "log_accuracy": p.run.reported_accuracy,
                "reproduces_log_accuracy": p.run.reported_accuracy is not None
                and abs(p.accuracy - p.run.reported_accuracy) < 5e-7,
                "scored_over_more_options": p.wider, "axes": p.axes} for p in planned]
    if args.json:
        import json

        print(json.dumps({"grid": args.grid, "cells_written": written, "runs": summary},
                         indent=2))
        return 0
    for p in planned:
        print(clean(f"{p.model} · {p.config_id}: {p.n_cells} cells; "
                       f"{p.report.summary()}; {p.reproduces()}"))
        if p.wider:
            print(clean(f"  {p.wider} items were scored over more options than our four: "
                           "the log's own correctness is kept"))
        if p.report.unmatched or p.report.ambiguous:
            print(clean(f"  warning: {len(p.report.unmatched) + len(p.report.ambiguous)} "
                           "samples not imported (pass --items with the task's item file)"),
                  file=sys.stderr)
    print(f"imported {written} cells into grid {args.grid!r}")
    return 0
