"""`fragility-tui runs list|show|cancel`: recorded runs, their provenance card, cancelling.

Torch-free: reads the runs table and checks pids; never imports the model code.
"""

from __future__ import annotations

import argparse
import json
import os
import signal

from fragility_tui.errors import InputError
from fragility_tui.processes import effective_status, pid_alive
from fragility_tui.provenance import provenance_card
from fragility_tui.store.runs import RunRecord, RunStatus
from fragility_tui.text import clean, finite


def register(sub) -> None:
    p = sub.add_parser("runs", help="list, show or cancel evaluation runs")
    actions = p.add_subparsers(dest="runs_action", metavar="ACTION", required=True,
                               parser_class=type(p))
    lst = actions.add_parser("list", help="every run, newest first")
    lst.add_argument("--grid", metavar="NAME", help="only runs of this grid")
    lst.add_argument("--json", action="store_true", help="print a JSON list")
    show = actions.add_parser("show", help="a run's provenance card (scoring first)")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="print the run row as JSON")
    cancel = actions.add_parser("cancel", help="stop a run cleanly after its current batch")
    cancel.add_argument("run_id", metavar="RUN_ID")
    delete = actions.add_parser("delete", help="forget a run record (its cells stay in the "
                                               "grid; asks for --yes)")
    delete.add_argument("run_id", metavar="RUN_ID")
    delete.add_argument("--yes", action="store_true",
                        help="really delete (without it: say what would go, delete nothing)")
    for q in (lst, show, cancel, delete):
        q.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS,
                       help="DuckDB store file (default: the user data dir)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from fragility_tui.bootstrap import open_store

    store = open_store(args.db)
    return {"list": cmd_list, "show": cmd_show, "cancel": cmd_cancel,
            "delete": cmd_delete}[args.runs_action](store, args)


def _get(store, run_id: str) -> RunRecord:
    row = store.get_run(run_id)
    if row is None:
        raise InputError(f"no run {run_id!r} in {store.path}", field="RUN_ID")
    return row


def cmd_list(store, args) -> int:
    runs = [r.with_status(effective_status(r)) for r in store.runs(args.grid)]
    if args.json:
        print(json.dumps(finite([r.to_dict() for r in runs]), default=str, indent=1,
                         allow_nan=False))
        return 0
    if not runs:
        print("no runs recorded")
        return 0
    header = (f"{'RUN_ID':<23} {'STATUS':<10} {'DEVICE':<7} {'GRID':<16} {'CELLS':>13} "
              f"{'TOKENS':>10} {'SECONDS':>8}  MODELS")
    print(header)
    for r in runs:
        cells = _one_line(f"{r.cells_done or 0}/{r.cells_total or 0}")[:13]
        print(f"{_one_line(r.run_id):<23} {_one_line(r.status)[:10]:<10} "
              f"{_one_line(r.shown_device or '-')[:7]:<7} "
              f"{_one_line(r.grid)[:16]:<16} {cells:>13} "
              f"{_count(r.tokens):>10} {_count(r.seconds):>8}  {_one_line(r.model)}")
        if r.note and r.status == RunStatus.QUEUED:  # what it waits for, under its row
            print(f"{'':<23} {_one_line(r.note)}")
    return 0


def cmd_show(store, args) -> int:
    row = _get(store, args.run_id)
    row = row.with_status(effective_status(row)).to_dict()
    if args.json:
        print(json.dumps(finite(row), default=str, indent=1, allow_nan=False))
        return 0
    print(provenance_card(row))
    return 0


def cmd_cancel(store, args) -> int:
    row = _get(store, args.run_id)
    if row.status not in (*RunStatus.active(), RunStatus.QUEUED):
        print(f"run {args.run_id} is {row.status}; nothing to cancel")
        return 0
    # The loop polls the status between batches; SIGTERM sets the same stop flag.
    store.update_run(args.run_id, status=RunStatus.CANCELLING)
    pid = row.pid
    if pid_alive(pid, row.pid_started):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        print(f"cancelling run {args.run_id} (pid {pid}): it stops after its current batch; "
              f"`fragility-tui run --resume {args.run_id}` continues it later")
    else:
        store.update_run(args.run_id, status=RunStatus.CANCELLED)
        print(f"run {args.run_id} had no live process; marked cancelled "
              f"(`fragility-tui run --resume {args.run_id}` continues it)")
    return 0


def cmd_delete(store, args) -> int:
    run = _get(store, args.run_id)
    if run.status in RunStatus.active() and pid_alive(run.pid, run.pid_started):
        raise InputError(f"run {args.run_id} is still running (pid {run.pid}): "
                         f"`fragility-tui runs cancel {args.run_id}` first", field="RUN_ID")
    what = (f"run record {args.run_id} ({run.status}, {run.model} on grid "
            f"{run.grid!r}); the cells it wrote stay in the grid")
    if not args.yes:
        raise InputError(f"this deletes {what}; nothing deleted: repeat with --yes",
                         field="--yes")
    store.delete_runs([args.run_id])
    print(f"deleted {what}")
    return 0


def _one_line(text) -> str:
    return clean(text, limit=200, one_line=True)


def _count(value) -> str:
    """A run's tokens or seconds as a whole number ('-' when absent or not finite)."""
    try:
        return f"{float(value):.0f}" if value is not None and abs(float(value)) < 1e18 else "-"
    except (TypeError, ValueError, OverflowError):
        return "-"
