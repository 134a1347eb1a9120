"""`fragility-tui run`: evaluate local models under the 26 configs (runners/ does the work).

Thin on purpose: argparse and validation here, torch only inside runners/, imported when
the command runs, so `fragility-tui --help` and the TUI never load it.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
from contextlib import contextmanager

from fragility_tui import settings
from fragility_tui.devices import normalise_device
from fragility_tui.errors import InputError
from fragility_tui.processes import pid_alive
from fragility_tui.store.runs import RunStatus
from fragility_tui.harness.configs import parse_config_list
from fragility_tui.items.item import DEFAULT_PER_BENCHMARK

SPEC_FLAGS = ("model", "items", "grid")  # what --resume takes from the recorded run

# The `--backend openai` options; each help is prefixed "with --backend openai: ".
OPENAI_OPTIONS = {
    "--base-url": {"metavar": "URL", "help": "the server, e.g. http://127.0.0.1:8000/v1"},
    "--served-model": {"metavar": "NAME", "help": "the model id as the server's /v1/models "
                       "lists it (the grid's model name unless --name or --model)"},
    "--api-key-env": {"metavar": "VAR", "help": "the environment variable holding the API "
                      "key (sent only in the Authorization header, never recorded)"},
    "--concurrency": {"type": int, "default": 4, "metavar": "N",
                      "help": "requests in flight at once (default 4)"},
    "--endpoint": {"default": "completions", "choices": ("completions", "chat"),
                   "help": "generation prompts as text to /v1/completions (default) or as "
                           "messages to /v1/chat/completions (the server's chat template); "
                           "cloze configs always use completions"},
}


def register(sub) -> None:
    p = sub.add_parser("run", help="evaluate local models on items under the 26 configs",
                       description="Evaluate one or more models on an item set under the 26 "
                                   "configs (or a subset) and write cells into the store. "
                                   "Re-running the same command, or --resume RUN_ID, skips "
                                   "cells already done.")
    p.add_argument("--model", action="append", metavar="SPEC",
                   help="alias (smollm2-135m-instruct, gemma3-270m), a .gguf file, a model "
                        "folder, or a hub id org/name[@revision]; repeat for several")
    p.add_argument("--items", action="append", metavar="PATH",
                   help="item file, folder or named source; repeat for several (default: "
                        "the shipped starter items, sample_grids/starter_items.jsonl)")
    p.add_argument("--per-benchmark", type=int, default=DEFAULT_PER_BENCHMARK, metavar="N",
                   help=f"sample up to N items per benchmark (default {DEFAULT_PER_BENCHMARK}; "
                        "0 = all)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="sampling and option-shuffle seed (default 0)")
    p.add_argument("--shard", metavar="I/N",
                   help="evaluate only shard I of N (0 <= I < N) of the sampled items, split "
                        "by a stable hash of each item id: N workers with the same command "
                        "and shards 0/N … N-1/N cover the items once; recorded in the run spec")
    p.add_argument("--configs", metavar="ID,...",
                   help="config ids or groups (generate, likelihood, o0..o5, letter, ...); "
                        "default all 26")
    p.add_argument("--grid", metavar="NAME", help="grid to write into (created if absent)")
    p.add_argument("--add-items", action="store_true",
                   help="let this run add its items to a --grid that holds another item set "
                        "(refused without it, naming both item-set hashes); the grid is "
                        "partial until every model has every item")
    p.add_argument("--name", metavar="NEW_NAME",
                   help="record the model under this name in the grid (one --model): how a "
                        "model already in the grid is evaluated again with other settings")
    p.add_argument("--prompt-mode", default="auto", choices=("auto", "chat", "raw"),
                   help="generation prompts through the chat template (chat) or as text "
                        "(raw); auto: chat only for an instruct model (a chat template and "
                        "'instruct', 'chat' or '-it' in its name)")
    p.add_argument("--quantize", choices=("int8", "int4"),
                   help="quantise weights with optimum-quanto; recorded as its own model "
                        "(e.g. NAME+int4) linked to its base")
    p.add_argument("--backend", default="transformers",
                   choices=("transformers", "vllm", "openai"),
                   help="what computes the cells (recorded in the model's fingerprint): "
                        "transformers (default; batched prefix-tree scoring), vllm, an "
                        "offline vLLM engine with prefix caching on a CUDA GPU "
                        "(experimental: not yet run on a GPU; pip install -e '.[vllm]'), or "
                        "openai, a model an OpenAI-compatible server serves (--base-url, "
                        "--served-model; --model then optionally names its local tokenizer)")
    for flag, options in OPENAI_OPTIONS.items():
        p.add_argument(flag, **{**options, "help": "with --backend openai: " + options["help"]})
    p.add_argument("--dtype", default="auto", choices=("auto", "bf16", "fp16", "fp32"))
    p.add_argument("--device", default="auto", metavar="DEV",
                   help="auto, cpu, cuda:N, or any (the first GPU with a free slot). A run "
                        "holds its device's slot while it runs (one run per GPU unless "
                        "FRAGILITY_GPU_SLOTS says more; CPU runs only when "
                        "FRAGILITY_CPU_SLOTS is set); on a busy device it waits as queued")
    p.add_argument("--no-wait", action="store_true",
                   help="refuse (exit 2) instead of waiting when the device is busy")
    p.add_argument("--batch-size", default="auto", metavar="N",
                   help="at most N items per batch (a batch is one store transaction); "
                        "default auto: as many as the token budget holds")
    p.add_argument("--batch-tokens", default="auto", metavar="N",
                   help="token budget: unique prompt tokens per batch and KV positions per "
                        "decoder call; default auto: from the device's memory (512 MiB of KV "
                        "on a CPU, half the free memory on a GPU; there a model's first "
                        "three batches take 1/8, 1/4 and 1/2 of it); halved on out-of-memory "
                        "and grown back")
    p.add_argument("--max-new-tokens", type=int, default=16, metavar="N")
    p.add_argument("--threads", type=int, default=2, metavar="N", help="torch CPU threads")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow a model's own Python code to run (off unless given)")
    p.add_argument("--no-prefix-reuse", action="store_true",
                   help="forward every prompt whole (for checks and benchmarks)")
    p.add_argument("--no-overlap", action="store_true",
                   help="plan, parse and write batches between model calls instead of on a "
                        "host thread beside them (same cells, slower; for checks)")
    p.add_argument("--out-parts", metavar="DIR",
                   help="write no store: each committed batch becomes a Parquet part under "
                        "DIR, with the run's record and items beside it (a cluster worker); "
                        "rerunning skips the cells DIR holds; `fragility-tui merge DIR` "
                        "brings them into a store (docs/scale.md)")
    p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="run one Ray task per (model, shard) on the cluster at ADDRESS (none: "
                        "start a local one); each task's parts come back through Ray's "
                        "object store (or go to --out-parts, a folder every node sees) and "
                        "are merged into the store as tasks finish; "
                        "needs the optional extra: pip install -e '.[cluster]'")
    p.add_argument("--shards", type=int, default=1, metavar="N",
                   help="with --ray: split each model's items into N shards (default 1)")
    p.add_argument("--gpus-per-task", type=float, metavar="G",
                   help="with --ray: GPUs each task asks Ray for, a share below 1 (its share "
                        "of the GPU's memory) or a whole number (default: 1 when the cluster "
                        "has GPUs and --device is not cpu, else 0)")
    p.add_argument("--events", metavar="PATH",
                   help="JSON-lines progress file (default: under the user data dir)")
    p.add_argument("--display", choices=("full", "plain", "none"),
                   help="progress display (default: full on a terminal, plain otherwise)")
    p.add_argument("--resume", metavar="RUN_ID",
                   help="continue a recorded run with its own spec")
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


def spec_from_args(args: argparse.Namespace):
    from runners.loop import RunSpec

    if not args.items:  # a first run needs no data of one's own: our starter items
        from fragility_tui.store.sample_grids import SAMPLE_GRIDS_DIR

        args.items = [str(SAMPLE_GRIDS_DIR / "starter_items.jsonl")]
    served = args.backend == "openai"  # --model optional: the served model's tokenizer
    missing = [f"--{flag}" for flag in SPEC_FLAGS
               if not getattr(args, flag) and not (served and flag == "model")]
    if missing:
        raise InputError(f"missing {', '.join(missing)} (or give --resume RUN_ID)")
    try:
        configs = parse_config_list(args.configs)
    except ValueError as exc:
        raise InputError(str(exc), field="--configs") from None
    if args.max_new_tokens < 1:
        raise InputError("--max-new-tokens must be at least 1", field="--max-new-tokens")
    if args.threads < 1:
        raise InputError("--threads must be at least 1", field="--threads")
    if args.name is not None and not args.name.strip():
        raise InputError("--name must not be empty", field="--name")
    args.model = args.model or []
    if served:
        server = _server_options(args)
    elif args.base_url or args.served_model or args.api_key_env:
        raise InputError("--base-url, --served-model and --api-key-env go with --backend "
                         "openai", field="--backend")
    if args.name and len(args.model) > 1:
        raise InputError("--name names one model; give a single --model with it",
                         field="--name")
    if args.backend == "vllm" and len(args.model) > 1:  # one engine holds the GPU per process
        raise InputError("--backend vllm evaluates one --model per run: vLLM does not reliably "
                         "free the GPU between engines in one process", field="--model")
    try:
        device = normalise_device(args.device)
    except ValueError as exc:
        raise InputError(str(exc), field="--device") from None
    if args.per_benchmark < 0:
        raise InputError("--per-benchmark must be 0 (all) or more", field="--per-benchmark")
    shard = None
    if args.shard is not None:
        from fragility_tui.items.item import parse_shard

        try:
            shard = list(parse_shard(args.shard))
        except ValueError as exc:
            raise InputError(str(exc), field="--shard") from None
    from runners.admission import item_path

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
                   name=args.name or None,
                   prompt_mode=args.prompt_mode, shard=shard, backend=args.backend,
                   server=server if served else None)


def _server_options(args: argparse.Namespace) -> dict:
    """RunSpec.server for --backend openai: the variable's name, never the key itself."""
    for flag in ("base_url", "served_model"):
        if not getattr(args, flag):
            raise InputError(f"--backend openai needs --{flag.replace('_', '-')}",
                             field=f"--{flag.replace('_', '-')}")
    if args.concurrency < 1:
        raise InputError("--concurrency must be at least 1", field="--concurrency")
    if args.api_key_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.api_key_env):
        raise InputError("--api-key-env takes the name of an environment variable (letters, "
                         "digits, _), not the key itself", field="--api-key-env")
    return {"base_url": args.base_url, "served_model": args.served_model,
            "api_key_env": args.api_key_env, "concurrency": args.concurrency,
            "endpoint": args.endpoint}


def _resumed_spec(store, run_id: str, args):
    from runners.loop import RunSpec

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
    from runners.events import choose_display
    from runners.loop import Run

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
                     display=choose_display(args.display), wait=not args.no_wait)
    try:
        status = runner.execute()
    except (InputError, KeyboardInterrupt):
        raise  # cli.py prints these (exit 2 / 130)
    except Exception as exc:  # recorded as failed by the run; one line for the user
        if settings.debug():
            raise
        from runners.loop import failure_reason

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
    from runners.events import choose_display
    from runners.loop import RunFailed
    from runners.ray_launcher import Launch

    if args.resume:
        raise InputError("--ray does not take --resume: run the same command again (it skips "
                         "the cells the parts hold)", field="--resume")
    spec = spec_from_args(args)
    if spec.backend == "openai":  # its tasks would be per --model spec; not built yet
        raise InputError("--ray does not take --backend openai yet: run shards with --shard "
                         "I/N against the server instead", field="--ray")
    launch = Launch(spec, open_store(args.db), address=args.ray or None, shards=args.shards,
                    folder=args.out_parts, gpus_per_task=args.gpus_per_task,
                    display=choose_display(args.display))
    try:
        status = launch.execute()
    except RunFailed as exc:  # recorded in the launch's run row; one line for the user
        print(f"error: run {launch.run_id} failed: {exc}", file=sys.stderr)
        return 1
    return 0 if status == RunStatus.FINISHED else 130
