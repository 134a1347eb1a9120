"""`fragility-tui runs list|show|cancel`: recorded runs, their provenance card, cancelling.

Torch-free: reads the runs table and checks pids; never imports the model code.
"""

from __future__ import annotations

import argparse
import json
import os
import signal

from fragility_tui.errors import InputError


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
    for q in (lst, show, cancel):
        q.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS,
                       help="DuckDB store file (default: the user data dir)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from fragility_tui.grid.store import Store

    store = Store(args.db)
    return {"list": cmd_list, "show": cmd_show, "cancel": cmd_cancel}[args.runs_action](store, args)


def _get(store, run_id: str) -> dict:
    row = store.get_run(run_id)
    if row is None:
        raise InputError(f"no run {run_id!r} in {store.path}", field="RUN_ID")
    return row


def cmd_list(store, args) -> int:
    from runners.launch import effective_status

    runs = store.list_runs(args.grid)
    for r in runs:
        r["status"] = effective_status(r)
    if args.json:
        print(json.dumps([_public(r) for r in runs], default=str, indent=1))
        return 0
    if not runs:
        print("no runs recorded")
        return 0
    header = f"{'RUN_ID':<23} {'STATUS':<10} {'GRID':<16} {'CELLS':>13} {'TOKENS':>10} {'SECONDS':>8}  MODELS"
    print(header)
    for r in runs:
        cells = f"{r.get('cells_done') or 0}/{r.get('cells_total') or 0}"
        print(f"{r['run_id']:<23} {r['status']:<10} {_safe(r['grid'])[:16]:<16} {cells:>13} "
              f"{r.get('tokens') or 0:>10} {r.get('seconds') or 0:>8.0f}  {_safe(r['model'])}")
    return 0


def cmd_show(store, args) -> int:
    from runners.launch import effective_status

    row = _get(store, args.run_id)
    row["status"] = effective_status(row)
    if args.json:
        print(json.dumps(_public(row), default=str, indent=1))
        return 0
    print(provenance_card(row))
    return 0


def cmd_cancel(store, args) -> int:
    from runners.launch import pid_alive

    row = _get(store, args.run_id)
    if row["status"] not in ("running", "cancelling", "queued"):
        print(f"run {args.run_id} is {row['status']}; nothing to cancel")
        return 0
    # The loop polls the status between batches; SIGTERM sets the same stop flag.
    store.update_run(args.run_id, status="cancelling")
    pid = row.get("pid")
    if pid_alive(pid, row.get("pid_started")):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        print(f"cancelling run {args.run_id} (pid {pid}): it stops after its current batch")
    else:
        store.update_run(args.run_id, status="cancelled")
        print(f"run {args.run_id} had no live process; marked cancelled")
    return 0


def _public(row: dict) -> dict:
    return {k: v for k, v in row.items()}


def _safe(text) -> str:
    """Untrusted names printed literally: control characters shown escaped."""
    text = "" if text is None else str(text)
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def provenance_card(row: dict) -> str:
    """The harness disclosure card of a run (SPEC §10), scoring first."""
    p = row.get("provenance") or {}
    spec = row.get("spec") or {}
    models = p.get("models") or {}
    lines = [f"Run {row['run_id']}  status {row['status']}  grid {_safe(row.get('grid'))}"]
    if row.get("error"):
        lines.append(f"  error: {_safe(row['error'])}")
    lines += ["", "Scoring"]
    configs = p.get("configs") or spec.get("configs") or []
    lines.append(f"  configs          {len(configs)}: {', '.join(configs)}")
    lines.append(f"  generation       {p.get('decoding', 'greedy')}; max_new_tokens "
                 f"{p.get('max_new_tokens', spec.get('max_new_tokens'))}; parser "
                 f"{p.get('parser_version', '?')}; prompts {p.get('prompt_version', '?')}")
    lines.append(f"  likelihood       {p.get('likelihood', '?')}")
    for name, m in models.items():
        lines.append(f"  {_safe(name):<16} {m.get('prompt_mode')}; BOS "
                     f"{'added' if m.get('add_bos') else 'not added'}; EOS ids {m.get('eos_ids')}")
    lines.append(f"  spec version     {p.get('spec_version', '?')}")
    lines += ["", "Items"]
    lines.append(f"  {p.get('items', '?')} items from {', '.join(map(_safe, p.get('item_sources') or spec.get('items') or []))}")
    lines.append(f"  per benchmark {p.get('per_benchmark')}, seed {p.get('seed')}, "
                 f"item-set sha256 {p.get('item_set_hash')}")
    for name, m in models.items():
        quant = m.get("quantization")
        lines += ["", f"Model {_safe(name)}"]
        lines.append(f"  source           {_safe(m.get('source'))}")
        if m.get("revision"):
            lines.append(f"  revision         {m['revision']}")
        lines.append(f"  weights sha256   {m.get('weights_sha256')}")
        lines.append(f"  dtype            {m.get('dtype')}")
        lines.append("  quantisation     " + (f"{quant['weights']} weights, {quant['library']} "
                                              f"{quant['version']} (base: {m.get('base_model')})"
                                              if quant else "none"))
        if quant and quant.get("execution"):
            lines.append(f"  executed as      {quant['execution']}")
        lines.append(f"  tokenizer sha256 {m.get('tokenizer_sha256')}")
        lines.append(f"  chat template    {m.get('chat_template_sha256') or 'none'}")
    libs = p.get("libraries") or {}
    lines += ["", "Runtime"]
    lines.append(f"  device {p.get('device', '?')}, threads {p.get('threads')}, batch size "
                 f"{p.get('batch_size')}, prefix reuse {p.get('prefix_reuse')}")
    lines.append(f"  padding          {p.get('padding')}")
    lines.append("  libraries        " + ", ".join(f"{k} {v}" for k, v in libs.items() if v))
    lines.append(f"  host {_safe(p.get('host'))}, python {p.get('python')}")
    code = p.get("fragility_tui") or {}
    if code:  # runs before this field was recorded have none
        lines.append(f"  fragility-tui    {code.get('version')}, commit {code.get('git') or 'unknown'}")
    lines.append(f"  started {row.get('started_at')}, ended {row.get('ended_at')}")
    lines.append(f"  cells {row.get('cells_done')}/{row.get('cells_total')}, tokens "
                 f"{row.get('tokens')}, seconds {row.get('seconds') or 0:.1f}")
    lines.append(f"  events           {row.get('events_path')}")
    return "\n".join(lines)
