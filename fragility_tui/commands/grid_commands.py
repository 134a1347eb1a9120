"""Store commands: grids, import, simulate, export, load-samples."""

from __future__ import annotations

import argparse
import json
import sys

from fragility_tui.bootstrap import open_store
from fragility_tui.errors import InputError
from fragility_tui.text import clean

# simulate's bounds (_check_simulate says where they come from)
SIMULATE_CELLS_MAX = 260_000_000
SIMULATE_ITEMS_MAX = 1_000_000
SIMULATE_MODELS_MAX = 100_000


def register(sub) -> None:
    p = sub.add_parser("grids", help="list the grids in the store (or delete one)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=cmd_grids)
    actions = p.add_subparsers(dest="grids_action", metavar="ACTION", parser_class=type(p))
    delete = actions.add_parser("delete", help="delete a grid: its cells, items, models and "
                                               "run records (asks for --yes)")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--yes", action="store_true",
                        help="really delete (without it: say what would go, delete nothing)")
    delete.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS,
                        help="DuckDB store file (default: the user data dir)")
    delete.set_defaults(func=cmd_grids_delete)

    p = sub.add_parser("import", help="import a long-format CSV/Parquet grid")
    p.add_argument("path", metavar="PATH", help="CSV or Parquet with columns model, item, "
                   "config, correct (optional: benchmark, subject, pred, raw_output)")
    p.add_argument("--grid", required=True, metavar="NAME")
    p.add_argument("--items", metavar="ITEMS_PATH",
                   help="item file to attach text/choices/gold from (matched on item id)")
    p.add_argument("--config-axes", metavar="FILE",
                   help="JSON {config_id: {axis: level}}: the axes of configs whose ids are "
                   "not ours (or use axis_<name> columns)")
    p.add_argument("--replace", action="store_true", help="replace an existing grid of that name")
    p.add_argument("--synthetic", action="store_true", help="label the grid synthetic")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("simulate", help="write a SYNTHETIC grid from the documented generative model")
    p.add_argument("--models", type=int, default=12, metavar="N",
                   help=f"simulated models (default 12), at most {SIMULATE_MODELS_MAX:,}; "
                        f"models x items x 26 configs at most {SIMULATE_CELLS_MAX:,} cells")
    p.add_argument("--items", type=int, default=3679, metavar="N",
                   help=f"simulated items (default 3679), at most {SIMULATE_ITEMS_MAX:,}")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="generator seed (default 0), a whole number from 0 to 2**63 - 1")
    p.add_argument("--grid", required=True, metavar="NAME")
    p.add_argument("--replace", action="store_true", help="replace an existing grid of that name")
    p.add_argument("--out", metavar="PATH", help="also write the cells as Parquet (sample_grids/)")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("export", help="export a grid's cells, report or provenance")
    p.add_argument("--grid", required=True, metavar="NAME")
    p.add_argument("--what", default="cells", choices=["cells", "report", "provenance"])
    p.add_argument("--format", default="csv",
                   choices=["csv", "parquet", "json", "markdown", "lmeval-samples"],
                   help="cells: csv, parquet, json, markdown or lmeval-samples (one likelihood "
                        "config of one model in lm-eval's --log_samples shape; needs --model "
                        "and --config); report and provenance: json or markdown")
    p.add_argument("--model", metavar="NAME", help="model (for --format lmeval-samples)")
    p.add_argument("--config", metavar="ID", help="config (for --format lmeval-samples)")
    p.add_argument("--reference", metavar="CONFIG",
                   help="for --what report: the config every figure is measured against "
                        "(default o0.letter when the grid has it, else its first config in "
                        "canonical order)")
    p.add_argument("--out", required=True, metavar="PATH")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("load-samples", help="load the grids shipped in sample_grids/ into the store")
    p.set_defaults(func=cmd_load_samples)


def cmd_grids(args) -> int:
    store = open_store(args.db)
    grids = store.list_grids()
    if args.json:
        print(json.dumps([g.to_json() for g in grids], indent=2))
        return 0
    if not grids:
        print(f"no grids in {store.path}")
        return 0
    print(f"{'grid':32} {'kind':9} {'models':>6} {'items':>6} {'configs':>7} {'cells':>9}  complete")
    for g in grids:
        kind = "SYNTHETIC" if g.synthetic else "real"
        name = clean(g.name, one_line=True)  # a name may hold escape sequences
        print(f"{name[:32]:32} {kind:9} {g.models:>6} {g.items:>6} {g.configs:>7} "
              f"{g.cells:>9}  {'yes' if g.complete else 'no'}")
    return 0


def cmd_grids_delete(args) -> int:
    from fragility_tui.processes import pid_alive
    from fragility_tui.store.runs import RunStatus

    store = open_store(args.db, load_samples=False)
    info = store.grid_info(args.name)  # InputError naming the grids there are
    runs = store.runs(args.name)
    live = [r.run_id for r in runs if r.status in RunStatus.active()
            and pid_alive(r.pid, r.pid_started)]
    if live:
        raise InputError(f"grid {args.name!r} is being written by run(s) {', '.join(live)}: "
                         "cancel them first (`fragility-tui runs cancel RUN_ID`)", field="NAME")
    what = (f"grid {args.name!r}: {info.cells:,} cells, {info.models} models, {info.items:,} "
            f"items and {len(runs)} run record(s)")
    if not args.yes:
        raise InputError(f"this deletes {what}; nothing deleted: repeat with --yes",
                         field="--yes")
    if runs:  # an imported or simulated grid has no run records
        store.delete_runs([r.run_id for r in runs])
    store.delete_grid(args.name)
    print(f"deleted {what}")
    return 0


def cmd_import(args) -> int:
    from fragility_tui.store.importer import import_long_grid

    items = None
    if args.items:
        from fragility_tui.items.loaders import load_items

        items, report = load_items(args.items)
        print(f"items from {args.items}: {report.summary()}", file=sys.stderr)
    store = open_store(args.db, load_samples=False)
    summary = import_long_grid(store, args.path, args.grid, items=items, items_path=args.items,
                               synthetic=args.synthetic, replace=args.replace,
                               config_axes_path=args.config_axes)
    print(f"imported grid {summary['grid']!r}: {summary['cells']} cells, {summary['models']} "
          f"models, {summary['items']} items, {summary['configs']} configs")
    return 0


def cmd_simulate(args) -> int:
    from fragility_tui.store.importer import write_synthetic_grid
    from fragility_tui.grid.simulate import simulate

    _check_simulate(args)
    grid = simulate(args.models, args.items, args.seed)
    store = open_store(args.db, load_samples=False)
    summary = write_synthetic_grid(store, grid, args.grid, replace=args.replace)
    if args.out:
        from fragility_tui.store.importer import export_cells

        export_cells(store, args.grid, args.out, "parquet")
    print(f"simulated SYNTHETIC grid {summary['grid']!r}: {summary['models']} models x "
          f"{summary['items']} items x {summary['configs']} configs ({summary['cells']} cells)")
    return 0


def _check_simulate(args) -> None:
    """Before anything is drawn: simulate holds the whole grid as pred (int8), bits and
    present (bool) [models, items, 26] and writes it in one transaction, ~20 bytes a cell at
    its peak (docs/scale.md: 100 x 20,000 x 26 = 52 M cells, 1.15 GB), and ~2.8 KB an item
    (its Item record, row and per-model [items, 26, 4] float32 scores: 1 x 200,000 peaked at
    0.8 GB). The bounds: 5 times that 52 M-cell grid (~5 GB), a million items (~3 GB) and
    1,000 times its 100 models (each drawn in a loop of its own: 1,000 models took 8.7 s)."""
    from fragility_tui.commands.flag_checks import check_count, check_seed
    from fragility_tui.harness.configs import CONFIG_IDS

    check_count(args.models, "--models", 1, SIMULATE_MODELS_MAX,
                "each is simulated in a loop of its own, ~9 ms, and stored with its metadata")
    check_count(args.items, "--items", 1, SIMULATE_ITEMS_MAX,
                "each item holds a record and a row of scores per config and option")
    cells = args.models * args.items * len(CONFIG_IDS)
    if cells > SIMULATE_CELLS_MAX:
        raise InputError(f"--models {args.models:,} x --items {args.items:,} x "
                         f"{len(CONFIG_IDS)} configs is {cells:,} cells; at most "
                         f"{SIMULATE_CELLS_MAX:,} (~20 bytes a cell while it is written: "
                         "about 5 GB)", field="--models/--items")
    check_seed(args.seed, "--seed")


def cmd_export(args) -> int:
    from fragility_tui.services.exports import export

    store = open_store(args.db)
    if args.reference is not None and args.what != "report":
        raise InputError("--reference applies to --what report only", field="--reference")
    options = None if args.reference is None else {"reference": args.reference}
    print(export(store, grid=args.grid, what=args.what, fmt=args.format, out=args.out,
                 model=args.model, config=args.config, report_options=options),
          file=sys.stderr)
    return 0


def cmd_load_samples(args) -> int:
    from fragility_tui.store.sample_grids import load_sample_grids

    store = open_store(args.db, load_samples=False)
    loaded = load_sample_grids(store)
    print("loaded: " + (", ".join(loaded) if loaded else "nothing new"))
    return 0
