"""`fragility-tui run`: evaluate local models under the 26 configs (runners/ does the work).

Thin on purpose: the options are declared in run_options.toml, their checks are here, torch
only inside runners/, imported when the command runs, so `fragility-tui --help` and the TUI
never load it.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import re
import sys
from contextlib import contextmanager

from fragility_tui import settings
from fragility_tui.backends import backend_info, served_backends
from fragility_tui.devices import normalise_device
from fragility_tui.errors import InputError
from fragility_tui.processes import pid_alive
from fragility_tui.store.runs import RunStatus
from fragility_tui.harness.configs import parse_config_list
from fragility_tui.commands.flag_checks import (check_count, check_listed, check_minimum,
                                                 check_run_flags)
from fragility_tui.commands.run_options import add_run_options

SPEC_FLAGS = ("model", "items", "grid")  # what --resume takes from the recorded run
# Upper bounds of run's own counts (its shared ones: commands/flag_checks.py), far above use:
PLAN_WORKERS_MAX = 64  # spawned planning processes (auto: at most 8)
CONCURRENCY_MAX = 1024  # --backend openai: one thread each (a ThreadPoolExecutor)
REQUEST_TIMEOUT_MAX = 86_400.0  # s; 1e10 overflowed time_t at the first request (exit 1)
SHARDS_MAX = 10_000  # --ray: one task spec, Ray task and run record per (model, shard)

def register(sub) -> None:
    p = sub.add_parser("run", help="evaluate local models on items under the 26 configs",
                       description="Evaluate one or more models on an item set under the 26 "
                                   "configs (or a subset, or the extension configs: "
                                   "letter likelihood, +bos/+nobos, +raw/+chat, +kN) and "
                                   "write "
                                   "cells into the store. "
                                   "Re-running the same command, or --resume RUN_ID, skips "
                                   "cells already done.")
    add_run_options(p)
    p.set_defaults(func=run)


def _positive_or_auto(text: str, flag: str) -> int | None:
    if text == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{flag} must be a positive integer or auto, got {text!r}",
                         field=flag) from None
    if value < 1:
        raise InputError(f"{flag} must be at least 1, got {value}", field=flag)
    return value


def _workers_or_auto(text: str) -> int | None:
    """--plan-workers: a count of processes (0: none), or auto (None)."""
    if text == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(f"--plan-workers must be 0 or more, or auto, got {text!r}",
                         field="--plan-workers")
    check_count(value, "--plan-workers", 0, PLAN_WORKERS_MAX,
                "each is a process of its own with the tokenizer loaded; auto starts at most 8")
    return value


def spec_from_args(args: argparse.Namespace):
    from runners.run.loop import RunSpec

    if not args.items:  # a first run needs no data of one's own: our starter items
        from fragility_tui.store.sample_grids import SAMPLE_GRIDS_DIR

        args.items = [str(SAMPLE_GRIDS_DIR / "starter_items.jsonl")]
    backend = backend_info(args.backend)
    served = backend.server_flags  # --model optional: the served model's tokenizer
    missing = [f"--{flag}" for flag in SPEC_FLAGS
               if not getattr(args, flag) and not (served and flag == "model")]
    if missing:
        raise InputError(f"missing {', '.join(missing)} (or give --resume RUN_ID)")
    check_listed(args.configs, "--configs")
    try:
        configs = parse_config_list(args.configs)
    except ValueError as exc:
        raise InputError(str(exc), field="--configs") from None
    check_run_flags(args)  # --max-new-tokens, --threads, --per-benchmark, --seed (as compare's)
    if args.name is not None and not args.name.strip():
        raise InputError("--name must not be empty", field="--name")
    args.model = args.model or []
    if served:
        server = _server_options(args)
    elif args.base_url or args.served_model or args.api_key_env:
        raise InputError("--base-url, --served-model and --api-key-env go with --backend "
                         f"{' or '.join(served_backends())}", field="--backend")
    if args.name and len(args.model) > 1:
        raise InputError("--name names one model; give a single --model with it",
                         field="--name")
    if backend.one_model_per_run and len(args.model) > 1:  # one engine holds the GPU
        raise InputError(f"--backend {backend.name} evaluates one --model per run: its engine "
                         "does not reliably free the GPU between engines in one process",
                         field="--model")
    try:
        device = normalise_device(args.device)
    except ValueError as exc:
        raise InputError(str(exc), field="--device") from None
    shard = None
    if args.shard is not None:
        from fragility_tui.items.item import parse_shard

        try:
            shard = list(parse_shard(args.shard))
        except ValueError as exc:
            raise InputError(str(exc), field="--shard") from None
    from runners.run.admission import item_path

    # Absolute where they name files: the record resumes from any working directory.
    return RunSpec(models=list(args.model), items=[item_path(p) for p in args.items],
                   grid=args.grid, add_items=args.add_items,
                   per_benchmark=args.per_benchmark or None, seed=args.seed, configs=configs,
                   quantize=args.quantize, dtype=args.dtype, device=device,
                   batch_size=_positive_or_auto(args.batch_size, "--batch-size"),
                   batch_tokens=_positive_or_auto(args.batch_tokens, "--batch-tokens"),
                   max_new_tokens=args.max_new_tokens,
                   trust_remote_code=args.trust_remote_code, threads=args.threads,
                   prefix_reuse=not args.no_prefix_reuse, overlap=not args.no_overlap,
                   plan_workers=_workers_or_auto(args.plan_workers),
                   name=args.name or None,
                   prompt_mode=args.prompt_mode, shard=shard, backend=args.backend,
                   server=server if served else None)


def _server_options(args: argparse.Namespace) -> dict:
    """RunSpec.server for --backend openai: the variable's name, never the key itself."""
    for flag in ("base_url", "served_model"):
        if not getattr(args, flag):
            raise InputError(f"--backend openai needs --{flag.replace('_', '-')}",
                             field=f"--{flag.replace('_', '-')}")
    check_minimum(args.concurrency, "--concurrency", 1)
    check_count(args.concurrency, "--concurrency", 1, CONCURRENCY_MAX,
                "a thread per request in flight")
    if not 0 < args.request_timeout <= REQUEST_TIMEOUT_MAX:  # nan fails too
        raise InputError(f"--request-timeout must be a number of seconds above 0 and at most "
                         f"{REQUEST_TIMEOUT_MAX:,g} (a day; past ~10**9 s the socket's "
                         f"deadline overflows), got {args.request_timeout:g}",
                         field="--request-timeout")
    if args.api_key_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.api_key_env):
        raise InputError("--api-key-env takes the name of an environment variable (letters, "
                         "digits, _), not the key itself", field="--api-key-env")
    return {"base_url": args.base_url, "served_model": args.served_model,
            "api_key_env": args.api_key_env, "concurrency": args.concurrency,
            "endpoint": args.endpoint, "timeout_s": args.request_timeout}


def _resumed_spec(store, run_id: str, args):
    from runners.run.loop import RunSpec

    run = store.get_run(run_id)
    if run is None:
        raise InputError(f"no run {run_id!r} in {store.path}", field="--resume")
    given = [f"--{flag}" for flag in SPEC_FLAGS if getattr(args, flag)]
    if given:
        raise InputError(f"--resume replays the run's recorded spec; drop {', '.join(given)}",
                         field="--resume")
    if args.add_items:
        raise InputError("--resume replays the run's recorded spec; drop --add-items",
                         field="--resume")
    if run.status == RunStatus.FINISHED:  # resuming it would only rewrite its record
        raise InputError(f"run {run_id} is finished: every cell it asked for is in grid "
                         f"{run.grid!r}, nothing to resume (a new `run` evaluates "
                         "again)", field="--resume")
    if run.status in (*RunStatus.active(), RunStatus.QUEUED) and \
            pid_alive(run.pid, run.pid_started):
        raise InputError(f"run {run_id} is still running (pid {run.pid})", field="--resume")
    return RunSpec.from_dict(run.spec)


def run(args: argparse.Namespace) -> int:
    from fragility_tui.bootstrap import open_store
    from runners.run.events import choose_display
    from runners.run.loop import Run

    if args.ray is not None:
        return _launch_on_ray(args)
    if args.shards != 1 or args.gpus_per_task is not None:
        raise InputError("--shards and --gpus-per-task go with --ray (one worker: --shard I/N)",
                         field="--shards")
    if getattr(args, "out_parts", None):
        from fragility_tui.store.parts import PartsStore

        store = PartsStore(args.out_parts)
    else:
        store = open_store(args.db)
    if args.resume:
        spec = _resumed_spec(store, args.resume, args)
    else:
        spec = spec_from_args(args)
    with _imports_not_collected():  # preparing the models imports torch and transformers
        runner = Run(spec, store, run_id=args.resume, events_path=args.events,
                     display=choose_display(args.display), wait=not args.no_wait,
                     take_queued=not args.no_take_queued)
    code = _execute(runner)
    while runner.successor is not None:  # queued runs of the same model, taken over
        runner = runner.successor
        _execute(runner)  # its outcome is its own command's exit status
    return code


def _execute(runner) -> int:
    """Run it; its exit status (a failure recorded by the run and told in one line)."""
    try:
        status = runner.execute()
    except (InputError, KeyboardInterrupt):
        raise  # cli.py prints these (exit 2 / 130)
    except Exception as exc:  # recorded as failed by the run; one line for the user
        if settings.debug():
            raise
        from runners.run.failure import failure_reason

        print(f"error: run {runner.run_id} failed: {failure_reason(exc)}", file=sys.stderr)
        return 1
    return 0 if status == RunStatus.FINISHED else 130


@contextmanager
def _imports_not_collected():
    """Importing torch and transformers makes a few hundred thousand objects that live as
    long as the process; Python's collector scanned them in several full collections while
    they loaded and once more at exit (about 2.5 s of a 30 s cloze run on a 2-core CPU).
    None while they load, then frozen out of every later collection: what the run makes
    afterwards (models, batches) is collected as usual."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _launch_on_ray(args: argparse.Namespace) -> int:
    from fragility_tui.bootstrap import open_store
    from runners.run.events import choose_display
    from runners.run.failure import RunFailed
    from runners.cluster.launcher import Launch

    if args.resume:
        raise InputError("--ray does not take --resume: run the same command again (it skips "
                         "the cells the parts hold)", field="--resume")
    check_count(args.shards, "--shards", 1, SHARDS_MAX,
                "a Ray task and a run record per model and shard")
    if args.gpus_per_task is not None and not math.isfinite(args.gpus_per_task):
        raise InputError(f"--gpus-per-task must be a finite number of GPUs, got "
                         f"{args.gpus_per_task:g}", field="--gpus-per-task")
    spec = spec_from_args(args)
    if not backend_info(spec.backend).ray:  # e.g. a served model: not built yet
        raise InputError(f"--ray does not take --backend {spec.backend} yet: run shards with "
                         "--shard I/N against the server instead", field="--ray")
    launch = Launch(spec, open_store(args.db), address=args.ray or None, shards=args.shards,
                    folder=args.out_parts, gpus_per_task=args.gpus_per_task,
                    display=choose_display(args.display))
    try:
        status = launch.execute()
    except RunFailed as exc:  # recorded in the launch's run row; one line for the user
        print(f"error: run {launch.run_id} failed: {exc}", file=sys.stderr)
        return 1
    return 0 if status == RunStatus.FINISHED else 130
