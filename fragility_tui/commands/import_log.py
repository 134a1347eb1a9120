"""`fragility-tui import-log PATH… --grid NAME`: other harnesses' logs → one grid, each
(model, config) with the config read from the log (SPEC v5 §2b imported configs)."""

from __future__ import annotations

import sys

from fragility_tui.errors import InputError


def register(sub) -> None:
    from fragility_tui.imports import ALIASES, FORMATS

    p = sub.add_parser("import-log", help="import lm-eval, Inspect, lighteval, Every Eval "
                                          "Ever or HELM logs into a grid (the config read "
                                          "from the log)")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="log files or folders (lm-eval output, .eval, details parquet, "
                        "Every Eval Ever JSONL, a HELM run directory)")
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
    """Streamed: a chunk of a log is read, matched and written before the next is read, all
    in one transaction (docs/imports.md, "Speed")."""
    from fragility_tui.bootstrap import open_store
    from fragility_tui.imports.matching import ItemIndex
    from fragility_tui.imports.pipeline import (Planner, collector_paused, items_from_logs,
                                                stream_runs)
    from fragility_tui.store.log_import import LogWriter

    store = open_store(args.db, load_samples=False)
    items = _items(store, args)
    planner = Planner(items, args.model)
    by_uid = {it.item_uid: it for it in items}
    with collector_paused(), LogWriter(store, args.grid, replace=args.replace) as writer:
        for runs in stream_runs(args.paths, args.format, model=args.model, metric=args.metric):
            if not by_uid:  # the logs carry their items
                new = items_from_logs(runs)
                if not new and not writer.items:
                    raise InputError("no items to match the logs to: the grid has none, the "
                                     "logs carry no whole items (question, choices, gold); "
                                     "pass --items", field="--items")
                planner.index.add(new)
                writer.add_items(new)
            for chunk in planner.plan(runs):
                if by_uid:  # --items or the grid's: add the ones the log scores
                    writer.add_items(by_uid[u] for u in chunk.columns["item_uid"]
                                     if u not in writer.items)
                writer.write(chunk)
            if not by_uid:  # written: a later chunk that scores one again rebuilds it
                planner.index = ItemIndex([])
            del runs
        imported = planner.finish()
        written = writer.finish()
    return _say(args, imported, written)


def _items(store, args):
    """--items, plus the grid's items (the logs' own items come chunk by chunk)."""
    items = []
    if args.items:
        from fragility_tui.items.loaders import load_items

        items, _ = load_items(args.items)
    if store.has_grid(args.grid):
        have = {it.item_uid for it in items}
        items += [it for it in store.load_items(args.grid) if it.item_uid not in have]
    return items


def _say(args, planned, written: int) -> int:
    from fragility_tui.text import clean

    summary = [{"model": p.model, "config": p.config_id, "source": p.run.source,
                "cells": p.n_cells, "matched": p.matched, "unmatched": p.unmatched,
                "ambiguous": p.ambiguous, "accuracy": p.accuracy,
                "log_accuracy": p.run.reported_accuracy,
                "reproduces_log_accuracy": p.reproduces_log,
                "scored_over_more_options": p.wider, "axes": p.axes} for p in planned]
    if args.json:
        import json

        print(json.dumps({"grid": args.grid, "cells_written": written, "runs": summary},
                         indent=2))
        return 0
    for p in planned:
        print(clean(f"{p.model} · {p.config_id}: {p.n_cells} cells; {p.summary()}; "
                    f"{p.reproduces()}"))
        if p.wider:
            print(clean(f"  {p.wider} items were scored over more options than our four: the "
                        "log's own correctness is kept"))
        if p.unmatched or p.ambiguous:
            print(clean(f"  warning: {p.unmatched + p.ambiguous} samples not imported (pass "
                        "--items with the task's item file)"), file=sys.stderr)
    print(f"imported {written} cells into grid {args.grid!r}")
    return 0
