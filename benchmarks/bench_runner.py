"""Runner benchmark (`make bench`): what a user would compare, measured in one run.

(a) lm-evaluation-harness itself on `cloze_qa`: 300 four-option ARC-Easy test items, both as
    whole commands, back to back (lm-eval 0.4.13, hf backend, batch 8, in a side venv that
    lmeval_venv() below makes; created on first use, skipped with a reason when it cannot
    be): wall-time ratio and per-item agreement with lm-eval's acc_norm.
(b) all 26 configs on 40 real items (10 per benchmark): the run's own tokens / its recorded
    seconds against a dense batched forward of the same weights (decoder only: the
    machine's limit), measured before and after the run: sustained over 20 s at 8 x 40
    tokens (the goal's yardstick), and as bursts at 8 x 40 and 8 x 160; and prompt tokens
    forwarded against the unique tokens of the items' prompt trees. --grid-repeats runs
    (3) alternate with the dense measurements; the median run is quoted.
(c) peak memory (max RSS) of a 265-starter-item x 26-config run, and of the runner before
    the batched scorer (--baseline-rev, run from a git worktree) on the --baseline-items
    longest starter items: its batches held 4 items and went shortest first, so its peak is
    its last batch, which those items reproduce (`--baseline-items 265` runs them all).

SmolLM2-135M-Instruct, `--device` (cpu) and `--dtype` (fp32) throughout (lm-eval gets the
same), `--threads` torch threads everywhere.
Ratios are the figures to quote: absolute times depend on the CPU. Run with nothing else on
the machine (two torch threads slow down ~10x while another process uses a core).

(d) host work beside the model calls: the (b) grid on --overlap-items items per benchmark,
    with --no-overlap and then with overlap, back to back: host milliseconds per item and
    the share of wall time with no model call in flight (goal with overlap: <= 10%).

(e) the extension configs' cost: `paper` against `paper,lik` on the (b) items (bench_configs).
(f) the prompt tokens each config set asks for, planned without running (bench_config_tokens).
(g) five solved examples: `paper` against `paper+k5`, `o0.letter.lik+k5` and `lik+k5`, and
    lm-eval's 5-shot label-likelihood task on the same items (bench_fewshot).

usage: python benchmarks/bench_runner.py [--parts lmeval,grid,overlap,tokens,configs,fewshot,memory]
       [--threads 2]
       [--device cpu|cuda] [--dtype fp32|bf16|fp16] [--baseline-rev c6c171a]
       [--baseline-items 16] [--grid-repeats 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# The real benchmark data beside the checkout (a worktree elsewhere names it).
SHARED = Path(os.environ.get("FRAGILITY_BENCH_DATA") or REPO.parent / "shared" / "benchmarks")
MODEL = "smollm2-135m-instruct"
GRID_FILES = ("arc_challenge_test", "hellaswag_val", "mmlu_test", "truthfulqa_mc1")
LMEVAL_VERSION = "0.4.13"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
CPU_LINEAR_SWITCH = "FRAGILITY_CPU_LINEAR"  # runners.models.cpu_linear.SWITCH (that module imports torch)
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
DEVICE, DTYPE = "cpu", "fp32"  # set from --device / --dtype
DENSE_SUSTAINED_S = 20.0  # seconds of back-to-back dense forwards before and after (b)


def run_command(argv: list[str], *, threads: int, cwd: Path = REPO, env: dict | None = None):
    """(wall seconds, peak RSS in MiB) of a whole command; fails loudly on a non-zero exit."""
    environment = {**os.environ, **OFFLINE, "OMP_NUM_THREADS": str(threads), **(env or {})}
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... exited {process.returncode}:\n"
                           f"{output[-3000:]}")
    return wall, usage.ru_maxrss / 1024


def fragility_run(db: Path, grid: str, items: list[str], configs: str, threads: int,
                  per_benchmark: int = 0, cli: list[str] | None = None, cwd: Path = REPO,
                  env: dict | None = None, extra: list[str] | None = None):
    argv = (cli or [sys.executable, "-m", "fragility_tui.cli"]) + [
        "run", "--model", MODEL, "--grid", grid, "--db", str(db), "--configs", configs,
        "--per-benchmark", str(per_benchmark), "--dtype", DTYPE, "--device", DEVICE,
        "--threads", str(threads), "--display", "none"]
    for path in items:
        argv += ["--items", path]
    return run_command(argv + list(extra or []), threads=threads, cwd=cwd, env=env)


def last_run(db: Path) -> dict:
    from fragility_tui.store.store import Store

    return Store(db).runs()[0].to_dict()


# -- (a) lm-evaluation-harness ------------------------------------------------------------

def lmeval_venv() -> Path | str:
    """The side venv's python, created once (`pip install lm_eval[hf]==LMEVAL_VERSION`); a reason string when it cannot be."""
    import platformdirs
    import torch
    import transformers

    folder = Path(os.environ.get("FRAGILITY_LMEVAL_VENV") or
                  Path(platformdirs.user_cache_dir("fragility-tui")) / f"venv-lmeval-{LMEVAL_VERSION}")
    python = folder / "bin" / "python"
    if (folder / "READY").is_file():
        return python
    torch_pin = f"torch=={torch.__version__.split('+')[0]}"  # the same build as ours
    steps = [[sys.executable, "-m", "venv", str(folder)],
             [str(python), "-m", "pip", "install", "-q", torch_pin],
             [str(python), "-m", "pip", "install", "-q", f"lm_eval[hf]=={LMEVAL_VERSION}",
              torch_pin, f"transformers=={transformers.__version__}", "gguf", "accelerate"]]
    print(f"  creating the lm-eval venv in {folder} (once) ...", flush=True)
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            return f"{' '.join(step[2:5])} failed: {(done.stderr or done.stdout).strip()[-300:]}"
    (folder / "READY").write_text("ok")
    return python


def lmeval_model_folder() -> Path:
    """The model folder lm-eval loads: the runner's own weights, in its dtype."""
    import torch

    from fragility_tui.hashing import sha256_file
    from runners.models.load import converted_gguf_folder, resolve_spec

    gguf = resolve_spec(MODEL).path
    return converted_gguf_folder(gguf, sha256_file(gguf), getattr(torch, TORCH_DTYPES[DTYPE]))


def arc_easy_items(path: Path, count: int):
    """`count` four-option ARC-Easy test items (seeded sample), written in the shared schema
    so lm-eval and our runner read the very same docs."""
    from fragility_tui.items.loaders import load_items

    items, _ = load_items(SHARED / "arc_easy_test.jsonl", per_benchmark=count, seed=0)
    write_items(path, items)
    return items


def lmeval_task_yaml(task: str, items_path: Path) -> str:
    """lm-eval's task over our items file, scored as our `cloze_qa` (the benchmarks' and the
    GPU job's, benchmarks/gpu_lmeval.py)."""
    return (f"task: {task}\ndataset_path: json\n"
            f"dataset_kwargs: {{data_files: {{test: {items_path}}}}}\n"
            "output_type: multiple_choice\ntest_split: test\n"
            'doc_to_text: "Question: {{question}}\\nAnswer:"\ndoc_to_choice: "{{choices}}"\n'
            'doc_to_target: gold\ntarget_delimiter: " "\n'
            "metric_list: [{metric: acc}, {metric: acc_norm}]\n")


def bench_lmeval(work: Path, threads: int, count: int, repeats: int = 1) -> dict:
    from fragility_tui.store.lmeval import ItemMatcher, predict, read_samples

    python = lmeval_venv()
    if isinstance(python, str):
        print(f"(a) skipped: cannot set up lm-evaluation-harness: {python}")
        return {"skipped": python}
    folder = lmeval_model_folder()
    items_path = work / "arc_easy_300.jsonl"
    items = arc_easy_items(items_path, count)
    tasks = work / "tasks"
    tasks.mkdir()
    (tasks / "arc_easy_bench.yaml").write_text(lmeval_task_yaml("arc_easy_bench", items_path))
    lmeval_cli = Path(python).parent / "lm_eval"
    pairs = []  # (lm-eval seconds, ours seconds), run back to back: the machine drifts
    default_kernel = []  # ours with torch's default linear kernel / lm-eval, per pair
    for repeat in range(repeats):
        out = work / f"lmeval-out-{repeat}"
        lm_s, lm_rss = run_command(
            [str(lmeval_cli), "run", "--model", "hf", "--model_args",
             f"pretrained={folder},dtype={TORCH_DTYPES[DTYPE]}", "--device", DEVICE,
             "--include_path", str(tasks),
             "--tasks", "arc_easy_bench", "--batch_size", "8", "--seed", "0", "--log_samples",
             "--output_path", str(out)], threads=threads)
        db = work / f"lmeval-{repeat}.duckdb"
        ours_s, ours_rss = fragility_run(db, "arc-easy", [str(items_path)], "cloze_qa", threads)
        pairs.append((lm_s, ours_s))
        line = (f"    pair {repeat + 1}/{repeats}: lm-eval {lm_s:.1f} s, ours {ours_s:.1f} s "
                f"({ours_s / lm_s:.3f}x)")
        if DEVICE == "cpu":  # what the linear kernel choice is worth (runners/models/cpu_linear.py)
            plain_s, _ = fragility_run(work / f"default-kernel-{repeat}.duckdb", "arc-easy",
                                       [str(items_path)], "cloze_qa", threads,
                                       env={CPU_LINEAR_SWITCH: "default"})
            default_kernel.append(plain_s / lm_s)
            line += f"; ours with torch's default linear kernel {plain_s:.1f} s ({plain_s / lm_s:.3f}x)"
        print(line, flush=True)
    ratios = sorted(ours / lm for lm, ours in pairs)
    lm_s, ours_s = (statistics.median(p[i] for p in pairs) for i in (0, 1))
    ratio = statistics.median(ratios)
    samples = read_samples(next(out.rglob("samples_arc_easy_bench_*.jsonl")))
    matcher = ItemMatcher(items)
    theirs = {}
    for sample in samples:
        item = matcher.match(sample)
        theirs[item.item_uid] = predict(item, sample, "acc_norm")
    from fragility_tui.store.store import Store

    with Store(db).connect() as con:
        ours = {uid: (pred, scores) for uid, pred, scores in con.execute(
            "SELECT item_uid, pred, scores FROM cells WHERE grid = 'arc-easy'").fetchall()}
    same = sum(ours[uid][0] == pred for uid, (pred, _) in theirs.items())
    gap = max(abs(a - b) for uid, (_, lls) in theirs.items()
              for a, b in zip(lls, ours[uid][1]))
    figures = {"items": len(theirs), "lmeval_s": round(lm_s, 1), "ours_s": round(ours_s, 1),
               "wall_ratio": round(ratio, 3), "wall_ratios": [round(r, 3) for r in ratios],
               "default_kernel_wall_ratios": [round(r, 3) for r in sorted(default_kernel)],
               "same_prediction": same,
               "agreement": round(same / len(theirs), 4), "max_loglikelihood_gap": gap,
               "lmeval_peak_mib": round(lm_rss), "ours_peak_mib": round(ours_rss)}
    print(f"(a) cloze_qa on {len(theirs)} ARC-Easy test items, whole commands, median of "
          f"{repeats} back-to-back pairs: lm-eval {LMEVAL_VERSION} {lm_s:.1f} s, "
          f"fragility-tui run {ours_s:.1f} s -> {ratio:.2f}x lm-eval's wall time "
          f"(pairs {min(ratios):.2f}-{max(ratios):.2f}x; goal <= 0.5x, aim 0.33x)")
    print(f"    same acc_norm prediction on {same}/{len(theirs)} items "
          f"({same / len(theirs):.1%}, goal >= 99%); largest log-likelihood gap {gap:.1e}")
    return figures


# -- (b) all 26 configs against the machine's limit -----------------------------------------

def dense_rate(threads: int, shapes=((8, 40), (8, 160)), repeats: int = 3,
               kernel: str | None = None, sustained_s: float = 0.0) -> dict:
    """Tokens per second of the decoder alone on random tokens, with the linear kernels the
    runner picks (`kernel` "default": torch's own; runners.models.cpu_linear): per shape the best
    of `repeats` forwards (a burst), and with `sustained_s` also "sustained_8x40", the
    tokens of back-to-back 8 x 40 forwards over that many seconds divided by their time
    (a mean rate, like the runner's own tokens / seconds)."""
    import torch

    from runners.models.cpu_linear import SWITCH
    from runners.models.prepare import load_spec as load_model

    torch.set_num_threads(threads)
    before = os.environ.get(SWITCH)
    if kernel:
        os.environ[SWITCH] = kernel
    try:
        decoder = load_model(MODEL, dtype=DTYPE, device=DEVICE).model.get_decoder()
    finally:
        os.environ.pop(SWITCH, None)
        if before is not None:
            os.environ[SWITCH] = before
    rates = {}
    with torch.no_grad():
        for batch, length in shapes:
            ids = torch.randint(0, 49000, (batch, length), device=DEVICE)
            decoder(input_ids=ids)  # warm-up
            best = float("inf")
            for _ in range(repeats):
                sync()
                started = time.perf_counter()
                decoder(input_ids=ids)
                sync()
                best = min(best, time.perf_counter() - started)
            rates[f"{batch}x{length}"] = round(batch * length / best, 1)
        if sustained_s:
            ids = torch.randint(0, 49000, (8, 40), device=DEVICE)
            forwards, started = 0, time.perf_counter()
            while time.perf_counter() - started < sustained_s:
                decoder(input_ids=ids)
                sync()
                forwards += 1
            rates["sustained_8x40"] = round(forwards * ids.numel()
                                            / (time.perf_counter() - started), 1)
    return rates


def sync() -> None:
    """Wait for the GPU: its calls return before the work is done."""
    if DEVICE.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def bench_grid(work: Path, threads: int, per_benchmark: int, repeats: int = 3) -> dict:
    """The run's tokens / seconds against the dense forward, measured just before and just
    after the run: this machine's speed drifts by 10-40% between minutes, and a burst (best
    of 3 forwards of 0.3 s) catches its fast moments while the run averages over 80 s. The
    goal is judged on the sustained rate (20 s of forwards, before and after, averaged); the
    burst ratios are printed beside it. With `repeats` > 1 the run and the yardstick
    alternate (dense, run, dense, run, ..., dense), each run is judged against the dense
    rates on either side of it, and the figures are the median run's (the lower middle one
    for an even count): six single runs ranged 0.54-0.63x, mostly with the yardstick's
    drift (docs/runner.md)."""
    files = [str(SHARED / f"{name}.jsonl") for name in GRID_FILES]
    dense = [dense_rate(threads, sustained_s=DENSE_SUSTAINED_S)]
    default_rates = dense_rate(threads, kernel="default") if DEVICE == "cpu" else None
    runs = []
    for k in range(repeats):
        db = work / f"grid{k}.duckdb"
        wall, rss = fragility_run(db, "grid", files, "generate,likelihood", threads,
                                  per_benchmark)
        dense.append(dense_rate(threads, sustained_s=DENSE_SUSTAINED_S))
        runs.append(grid_figures(last_run(db), wall, rss, dense[-2], dense[-1]))
        print(f"    run {k + 1} of {repeats}: {runs[-1]['tokens_per_s']:.0f} tokens/s, dense "
              f"{dense[-2]['sustained_8x40']:.0f} before / {dense[-1]['sustained_8x40']:.0f} "
              f"after -> {runs[-1]['vs_dense_sustained_8x40']:.2f}x", flush=True)
    ratios = [run["vs_dense_sustained_8x40"] for run in runs]
    figures = {**sorted(runs, key=lambda run: run["vs_dense_sustained_8x40"])[(len(runs) - 1) // 2],
               "repeats": repeats, "vs_dense_sustained_8x40_runs": ratios,
               "dense_default_kernel_tokens_per_s": default_rates}
    print_grid(figures, default_rates)
    return figures


def grid_figures(run: dict, wall: float, rss: float, before: dict, after: dict) -> dict:
    """One (b) run's figures against the dense rates measured just before and after it."""
    record = run["provenance"]["batching"][MODEL]
    tokens = record["tokens"]
    rate = run["tokens"] / run["seconds"]
    sustained = (before["sustained_8x40"] + after["sustained_8x40"]) / 2
    burst = {shape: max(before[shape], after[shape]) for shape in ("8x40", "8x160")}
    return {"items": run["provenance"]["items"], "cells": run["cells_done"],
            "run_tokens": run["tokens"], "run_seconds": round(run["seconds"], 1),
            "command_s": round(wall, 1), "tokens_per_s": round(rate, 1),
            "dense_tokens_per_s": {"before": before, "after": after},
            "dense_burst_tokens_per_s": burst,
            "vs_dense_sustained_8x40": round(rate / sustained, 3),
            "vs_dense_8x40": round(rate / burst["8x40"], 3),
            "vs_dense_8x160": round(rate / burst["8x160"], 3),
            "forwarded_vs_unique": round(tokens["prompt_forwarded"] / tokens["item_tree_tokens"], 3),
            "tokens": tokens, "batching": {k: v for k, v in record.items() if k != "tokens"},
            "peak_mib": round(rss)}


def print_grid(figures: dict, default_rates: dict | None) -> None:
    before, after = figures["dense_tokens_per_s"]["before"], figures["dense_tokens_per_s"]["after"]
    tokens, rate = figures["tokens"], figures["tokens_per_s"]
    ratios = figures["vs_dense_sustained_8x40_runs"]
    print(f"(b) all 26 configs, {figures['items']} real items ({figures['cells']} cells), "
          f"the median of {len(ratios)} run{'s' if len(ratios) > 1 else ''}: {figures['run_tokens']} tokens in "
          f"{figures['run_seconds']:.1f} s recorded = {rate:.0f} tokens/s")
    print(f"    dense decoder forward here, 8 x 40 sustained over {DENSE_SUSTAINED_S:.0f} s: "
          f"{before['sustained_8x40']:.0f} tokens/s before the run, "
          f"{after['sustained_8x40']:.0f} after -> runner "
          f"{figures['vs_dense_sustained_8x40']:.2f}x their mean (goal >= 0.6x; the runs: "
          f"{', '.join(f'{r:.2f}x' for r in ratios)})")
    burst = figures["dense_burst_tokens_per_s"]
    print(f"    bursts (best of 3 forwards, the higher of before/after): "
          f"{burst['8x40']:.0f} tokens/s at 8 x 40, {burst['8x160']:.0f} at 8 x 160 -> runner "
          f"{figures['vs_dense_8x40']:.2f}x and {figures['vs_dense_8x160']:.2f}x")
    if default_rates:
        print(f"    (the same forward with torch's default linear kernel: "
              f"{default_rates['8x40']:.0f} tokens/s at 8 x 40, {default_rates['8x160']:.0f} at "
              f"8 x 160; runners/models/cpu_linear.py)")
    print(f"    prompt tokens forwarded {tokens['prompt_forwarded']} vs the items' prompt-tree "
          f"tokens {tokens['item_tree_tokens']}: {figures['forwarded_vs_unique']:.3f}x "
          f"(goal <= 1.15x; without reuse {tokens['prompt_without_reuse']}); padding "
          f"{tokens['prompt_padding']} prefill, {tokens['decode_padding']} decoding; "
          f"{tokens['prefill_calls']} prefill and {tokens['decode_calls']} decoding calls")


# -- (d) host work beside the model calls ----------------------------------------------------

def bench_overlap(work: Path, threads: int, per_benchmark: int) -> dict:
    """The same grid run with --no-overlap and then with overlap, back to back: host
    milliseconds per item (planning, parsing, writing, the scorer's own Python) and the
    share of the scoring's wall time with no model call in flight (provenance
    `host_overlap`, from runners.backends.transformers.model_calls.CallClock)."""
    files = [str(SHARED / f"{name}.jsonl") for name in GRID_FILES]
    figures = {}
    for label, extra in (("serial", ["--no-overlap"]), ("overlap", [])):
        db = work / f"{label}.duckdb"
        wall, _ = fragility_run(db, "grid", files, "generate,likelihood", threads, per_benchmark,
                                extra=extra)
        timing = last_run(db)["provenance"]["host_overlap"][MODEL]
        figures[label] = dict(timing, command_s=round(wall, 1))
        print(f"(d) {label:7s}: {timing['items']} items, scoring {timing['wall_s']:.1f} s, "
              f"model calls {timing['model_call_s']:.1f} s, no model call in flight "
              f"{timing['no_model_call_share']:.1%} of the wall time (goal <= 10% with "
              f"overlap); host work {timing['host_ms_per_item']:.0f} ms per item "
              f"(plan/parse/write {timing['plan_parse_write_s']:.1f} s, scorer "
              f"{timing['scorer_host_s']:.1f} s); first batch planned in "
              f"{timing['first_batch_wait_s']:.2f} s")
    return figures


# -- (c) peak memory --------------------------------------------------------------------------

CONFIG_CASES = (  # (label, --configs, --prompt-mode) of (e), each against its mode's paper
    ("paper", "paper", "auto"), ("paper,lik", "paper,lik", "auto"),
    ("paper,lik+chat", "paper,lik+chat", "auto"),
    ("paper raw", "paper", "raw"), ("paper,lik raw", "paper,lik", "raw"))


def bench_configs(work: Path, threads: int, per_benchmark: int) -> dict:
    """(e) what the extension configs cost (issue 56): the paper's 26 against `paper,lik`
    (the 18 letter-likelihood configs beside them) on the (b) items, as whole runs: in the
    model's own prompt mode (SmolLM2-Instruct: chat, so the .lik configs' raw prompts share
    only the question stem with the templated generation prompts), with `lik+chat` (the
    labels after the template's assistant turn: the generation prompts' leaves), and in
    raw mode (`--prompt-mode raw`: the .lik prompts are the generation prompts). Each case
    once, then again in reverse order (the machine's drift cancels to first order); the
    runs' recorded seconds, command wall times and prompt tokens forwarded. Goal:
    `paper,lik` <= 1.15x `paper`."""
    files = [str(SHARED / f"{name}.jsonl") for name in GRID_FILES]
    measured: dict[str, list] = {label: [] for label, _, _ in CONFIG_CASES}
    for k, (label, configs, mode) in enumerate(CONFIG_CASES + CONFIG_CASES[::-1]):
        db = work / f"configs{k}.duckdb"
        wall, _ = fragility_run(db, "g", files, configs, threads, per_benchmark,
                                extra=["--prompt-mode", mode])
        run = last_run(db)
        tokens = run["provenance"]["batching"][MODEL]["tokens"]
        measured[label].append({"run_seconds": run["seconds"], "command_s": wall,
                                "cells": run["cells_done"],
                                "prompt_forwarded": tokens["prompt_forwarded"],
                                "decode_tokens": tokens["decode_forwarded"]})
        print(f"    {label:>15}: {run['seconds']:.1f} s run, {wall:.1f} s command, "
              f"{tokens['prompt_forwarded']:,} prompt tokens forwarded", flush=True)

    def total(label, key):
        return sum(r[key] for r in measured[label])

    ratios = {}
    for label, base in (("paper,lik", "paper"), ("paper,lik+chat", "paper"),
                        ("paper,lik raw", "paper raw")):
        ratios[label] = {key: round(total(label, key) / total(base, key), 3)
                         for key in ("run_seconds", "command_s", "prompt_forwarded")}
        print(f"(e) {label} / {base} on {per_benchmark * len(files)} items: run seconds "
              f"{ratios[label]['run_seconds']:.2f}x, command {ratios[label]['command_s']:.2f}x, "
              f"prompt tokens forwarded {ratios[label]['prompt_forwarded']:.2f}x "
              "(goal <= 1.15x)")
    return {"runs": measured, "items": per_benchmark * len(files), "ratios": ratios}


TOKEN_CASES = ("paper", "paper,lik", "paper,lik+chat", "paper+k5", "paper,paper+k5")


def bench_config_tokens(per_benchmark: int) -> dict:
    """(f) what each config set asks the model to read, without running it (exact, no
    timing noise): the unique prompt tokens of the (b) items' prefix trees under each set
    of TOKEN_CASES, in the model's chat mode and in raw mode, as multiples of `paper`."""
    from fragility_tui.harness.configs import parse_config_list
    from fragility_tui.harness.fewshot import pools_by_benchmark
    from fragility_tui.items.loaders import load_many
    from runners.models.prepare import prepare_model
    from runners.plan.item_requests import Encoder, plan_item
    from runners.plan.prefix_tree import build_tree, count_tokens

    items, _ = load_many([str(SHARED / f"{name}.jsonl") for name in GRID_FILES],
                         per_benchmark=per_benchmark, seed=0)
    prepared = prepare_model(MODEL, device="cpu")
    pools = pools_by_benchmark(items)
    figures: dict = {}
    for mode in ("chat", "raw"):
        encoder = Encoder(prepared.tokenizer, mode == "chat", prepared.template_args)
        for case in TOKEN_CASES:
            configs, total = parse_config_list(case), 0
            for item in items:
                gen, lik = [], []
                plan_item(encoder, item, configs, 0, gen, lik, pools)
                total += count_tokens(build_tree([r.tokens for r in gen + lik]))
            figures.setdefault(mode, {})[case] = total
        paper = figures[mode]["paper"]
        print(f"(f) {mode} mode, {len(items)} items: " + "; ".join(
            f"{case} {n:,} ({n / paper:.2f}x)" for case, n in figures[mode].items()))
    return figures


FEWSHOT_CASES = (  # (label, --configs) of (g), in the order run
    ("paper", "paper"), ("paper+k5", "paper+k5"), ("o0.letter.lik+k5", "o0.letter.lik+k5"),
    ("lik+k5", "lik+k5"))
LETTER_LIK_TASK = (  # lm-eval's label-likelihood task over our o0.letter prompt, 5-shot
    "task: {task}\ndataset_path: json\ndataset_kwargs: {{data_files: {{test: {items}}}}}\n"
    "output_type: multiple_choice\ntest_split: test\nfewshot_split: test\n"
    'doc_to_text: "Question: {{{{question.strip()}}}}\\nA. {{{{choices[0].strip()}}}}\\n'
    'B. {{{{choices[1].strip()}}}}\\nC. {{{{choices[2].strip()}}}}\\n'
    'D. {{{{choices[3].strip()}}}}\\nAnswer:"\n'
    'doc_to_choice: ["A", "B", "C", "D"]\ndoc_to_target: gold\ntarget_delimiter: " "\n'
    "metric_list: [{{metric: acc}}]\n")


def write_items(path: Path, items) -> Path:
    """Items in the shared schema, so lm-eval and our runner read the very same docs."""
    with open(path, "w") as fh:
        for item in items:
            fh.write(json.dumps({"id": item.source_id, "benchmark": item.benchmark,
                                 "subject": item.subject, "question": item.question,
                                 "choices": list(item.choices), "gold": item.gold}) + "\n")
    return path


def bench_fewshot(work: Path, threads: int, per_benchmark: int) -> dict:
    """(g) five solved examples (issue 56): whole runs of `paper`, `paper+k5`,
    `o0.letter.lik+k5` (one config: the lettered prompt after five solved examples, scored
    by the labels' log-likelihoods) and `lik+k5` (its 18 orders and formats) on the (b)
    items, in the model's own prompt mode, each once and then again in reverse order;
    beside them lm-evaluation-harness running the same 5-shot label-likelihood task
    (LETTER_LIK_TASK, one task per benchmark, examples drawn by lm-eval from the
    benchmark's other items, as ours are: so the same kind of prompts, not the same shots)
    as a whole command before and after ours. Ratios of run seconds (ours: the run's own
    recorded seconds and the command's; lm-eval: the command's, model load included)."""
    from fragility_tui.items.loaders import load_many

    python = lmeval_venv()
    files = [str(SHARED / f"{name}.jsonl") for name in GRID_FILES]
    items, _ = load_many(files, per_benchmark=per_benchmark, seed=0)
    measured: dict[str, list] = {label: [] for label, _ in FEWSHOT_CASES}
    lmeval: list[dict] = []

    names = []  # one lm-eval task per benchmark, over the same items as ours
    for benchmark in sorted({item.benchmark for item in items}):
        name = f"k5_letter_lik_{benchmark}"
        path = write_items(work / f"{benchmark}.jsonl",
                           [item for item in items if item.benchmark == benchmark])
        (work / "tasks").mkdir(exist_ok=True)
        (work / "tasks" / f"{name}.yaml").write_text(LETTER_LIK_TASK.format(task=name,
                                                                           items=path))
        names.append(name)

    def run_lmeval(k: int) -> None:
        if isinstance(python, str):
            return
        out = work / f"lmeval-out-{k}"
        wall, _ = run_command(
            [str(Path(python).parent / "lm_eval"), "run", "--model", "hf", "--model_args",
             f"pretrained={lmeval_model_folder()},dtype={TORCH_DTYPES[DTYPE]}",
             "--device", DEVICE, "--include_path", str(work / "tasks"),
             "--tasks", ",".join(names), "--num_fewshot", "5",
             "--batch_size", "8", "--seed", "0", "--log_samples", "--output_path", str(out)],
            threads=threads)
        contexts = {line["arguments"]["gen_args_0"]["arg_0"]
                    for path in out.rglob("samples_*.jsonl")
                    for line in map(json.loads, path.read_text().splitlines())}
        lmeval.append({"command_s": wall, "docs": len(contexts)})
        print(f"    lm-eval 5-shot letter likelihood: {wall:.1f} s command, "
              f"{len(contexts)} docs", flush=True)

    run_lmeval(0)
    for k, (label, configs) in enumerate(FEWSHOT_CASES + FEWSHOT_CASES[::-1]):
        db = work / f"fewshot{k}.duckdb"
        wall, _ = fragility_run(db, "g", files, configs, threads, per_benchmark)
        run = last_run(db)
        tokens = run["provenance"]["batching"][MODEL]["tokens"]
        measured[label].append({"run_seconds": run["seconds"], "command_s": wall,
                                "cells": run["cells_done"],
                                "prompt_forwarded": tokens["prompt_forwarded"]})
        print(f"    {label:>16}: {run['seconds']:.1f} s run, {wall:.1f} s command, "
              f"{tokens['prompt_forwarded']:,} prompt tokens forwarded", flush=True)
    run_lmeval(1)

    def total(label, key):
        return sum(r[key] for r in measured[label])

    ratios = {label: {key: round(total(label, key) / total("paper", key), 3)
                      for key in ("run_seconds", "command_s", "prompt_forwarded")}
              for label, _ in FEWSHOT_CASES}
    for label, _ in FEWSHOT_CASES[1:]:
        print(f"(g) {label} / paper on {len(items)} items: run seconds "
              f"{ratios[label]['run_seconds']:.2f}x, command {ratios[label]['command_s']:.2f}x, "
              f"prompt tokens forwarded {ratios[label]['prompt_forwarded']:.2f}x")
    figures = {"runs": measured, "items": len(items), "ratios": ratios}
    if lmeval:
        lm_s = sum(r["command_s"] for r in lmeval)
        figures["lmeval"] = {"runs": lmeval, "version": LMEVAL_VERSION}
        for label in ("o0.letter.lik+k5", "lik+k5"):
            figures["lmeval"][f"{label}_command_over_lmeval"] = round(
                total(label, "command_s") / lm_s, 3)
            print(f"    {label} command / lm-eval's 5-shot letter-likelihood command: "
                  f"{total(label, 'command_s') / lm_s:.2f}x", flush=True)
    else:
        figures["lmeval"] = {"skipped": python}
        print(f"    lm-eval skipped: {python}")
    return figures


def longest_starter_items(path: Path, count: int) -> Path:
    from fragility_tui.items.loaders import load_items

    items, _ = load_items(REPO / "sample_grids" / "starter_items.jsonl", per_benchmark=None)
    chosen = {it.item_uid for it in sorted(
        items, key=lambda it: -(len(it.question) + sum(map(len, it.choices))))[:count]}
    with open(REPO / "sample_grids" / "starter_items.jsonl") as source, open(path, "w") as out:
        for line in source:
            record = json.loads(line)
            if f"{record['benchmark']}/{record['id']}" in chosen:
                out.write(line)
    return path


def bench_memory(work: Path, threads: int, baseline_rev: str, baseline_items: int) -> dict:
    starter = str(REPO / "sample_grids" / "starter_items.jsonl")
    wall, rss = fragility_run(work / "memory.duckdb", "starter", [starter], "generate,likelihood", threads)
    run = last_run(work / "memory.duckdb")
    figures = {"ours": {"items": run["provenance"]["items"], "peak_mib": round(rss),
                        "command_s": round(wall, 1),
                        "tokens_per_s": round(run["tokens"] / run["seconds"], 1)}}
    print(f"(c) peak memory, {figures['ours']['items']} starter items x 26 configs: "
          f"{rss:.0f} MiB ({wall:.0f} s, {figures['ours']['tokens_per_s']:.0f} tokens/s)")
    baseline = work / "baseline"
    made = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(baseline),
                           baseline_rev], capture_output=True, text=True)
    if made.returncode != 0:
        print(f"    baseline skipped: revision {baseline_rev} is not in this checkout")
        return figures
    try:
        items = (starter if baseline_items >= 265 else
                 str(longest_starter_items(work / "longest.jsonl", baseline_items)))
        env = {"PYTHONPATH": str(baseline)}  # its own fragility_tui and runners, our venv
        wall, base_rss = fragility_run(work / "baseline.duckdb", "starter", [items], "generate,likelihood",
                                       threads, cwd=baseline, env=env)
        revision = last_run(work / "baseline.duckdb")["provenance"]["fragility_tui"]["git"]
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(baseline)],
                       capture_output=True)
    figures["baseline"] = {"revision": revision, "items": min(baseline_items, 265),
                           "peak_mib": round(base_rss), "command_s": round(wall, 1)}
    print(f"    before the batched scorer ({(revision or baseline_rev)[:7]}), the "
          f"{min(baseline_items, 265)} longest starter items: {base_rss:.0f} MiB "
          f"-> ours {rss / base_rss:.2f}x its peak (goal <= 1x)")
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="lmeval,grid,overlap,tokens,configs,fewshot,memory")
    parser.add_argument("--overlap-items", type=int, default=3,
                        help="items per benchmark in (d)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--per-benchmark", type=int, default=10, help="items per benchmark in (b)")
    parser.add_argument("--grid-repeats", type=int, default=3,
                        help="(b) runs, each between two dense measurements; the median run")
    parser.add_argument("--lmeval-items", type=int, default=300)
    parser.add_argument("--lmeval-repeats", type=int, default=3,
                        help="back-to-back (lm-eval, ours) pairs in (a); the median ratio")
    parser.add_argument("--baseline-rev", default="c6c171a")
    parser.add_argument("--baseline-items", type=int, default=16)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--dtype", default="fp32", choices=sorted(TORCH_DTYPES))
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.grid_repeats < 1:
        parser.error(f"--grid-repeats must be at least 1, not {args.grid_repeats}")
    global DEVICE, DTYPE
    DEVICE, DTYPE = args.device, args.dtype
    if not SHARED.is_dir():
        print(f"skipped: real benchmark data not found at {SHARED}")
        return 0
    parts = set(args.parts.split(","))
    figures = {"model": MODEL, "threads": args.threads, "device": DEVICE, "dtype": DTYPE}
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        work = Path(tmp)
        if "lmeval" in parts:
            (work / "a").mkdir()
            figures["lmeval"] = bench_lmeval(work / "a", args.threads, args.lmeval_items,
                                            args.lmeval_repeats)
        if "grid" in parts:
            (work / "b").mkdir()
            figures["grid"] = bench_grid(work / "b", args.threads, args.per_benchmark,
                                         args.grid_repeats)
        if "overlap" in parts:
            (work / "d").mkdir()
            figures["overlap"] = bench_overlap(work / "d", args.threads, args.overlap_items)
        if "tokens" in parts:
            figures["tokens"] = bench_config_tokens(args.per_benchmark)
        if "configs" in parts:
            (work / "e").mkdir()
            figures["configs"] = bench_configs(work / "e", args.threads, args.per_benchmark)
        if "fewshot" in parts:
            (work / "g").mkdir()
            figures["fewshot"] = bench_fewshot(work / "g", args.threads, args.per_benchmark)
        if "memory" in parts:
            (work / "c").mkdir()
            figures["memory"] = bench_memory(work / "c", args.threads, args.baseline_rev,
                                             args.baseline_items)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
