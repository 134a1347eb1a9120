"""`fragility-tui merge DIR [DIR ...] --grid NAME`: store-less workers' parts into a grid."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("merge", help="merge the Parquet parts of `run --out-parts` workers "
                                     "into a grid",
                       description="Merge the parts written by `fragility-tui run --out-parts "
                                   "DIR` (one folder or several) into a grid, in one "
                                   "transaction. Merging again, or a part present twice, adds "
                                   "nothing. Parts made with another seed or item set than "
                                   "the grid's, or a model under two settings, are refused.")
    p.add_argument("folders", nargs="+", metavar="DIR", help="a folder of parts")
    p.add_argument("--grid", required=True, metavar="NAME",
                   help="grid to merge into (created if absent)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from fragility_tui.bootstrap import open_store
    from fragility_tui.store.merge import merge_parts

    summary = merge_parts(open_store(args.db), args.folders, args.grid)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"merged {summary['parts']} part(s) of {summary['runs']} run(s) into grid "
              f"{summary['grid']!r}: {summary['cells_added']} new cell(s), "
              f"{summary['items_added']} new item(s); the grid holds {summary['cells']} cells")
    return 0
