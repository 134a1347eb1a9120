"""lm-evaluation-harness's hf backend against this runner on one GPU: the same model folder,
the same 300 ARC-Easy cloze items as `make bench`'s (a), whole processes back to back
(issue 59 item 8: "the runner's ratio against lm-eval exists on a GPU, not only on this CPU").

The GPU box has no network and no room for a real model in a job (64 MiB), so the job builds
the model there: llama3-8b's shape with random bf16 weights (benchmarks/gpu_check_models.py),
saved as a transformers folder that both harnesses load. lm-eval travels as wheels of its own
(`make gpu-lmeval-wheels`: lm_eval 0.4.13 and what the box lacks, ~32 MiB), unpacked with
`pip install --target` (no venv: the box's python3 is itself a venv, whose torch a new venv
would not see) and put on PYTHONPATH for lm-eval's process only.

    make gpu-lmeval-items gpu-lmeval-wheels     # here, beside ../shared and a network
    OUT=$OUT bash benchmarks/gpu_lmeval_box.sh  # on the box, carrying build/
    python benchmarks/gpu_lmeval.py compare --out DIR   # here, on what came back

`run` (the box) times, per pair: lm-eval's whole command (`--batch_size auto`, as a GPU
user runs it; its samples logged) and then ours as a whole process (`ours`: python start,
imports, loading the folder with the runner's loader, planning and scoring `cloze_qa`;
no store: duckdb is not on the box), and writes lmeval.json, ours-N.json and lm-eval's
samples into --out. `compare` (here, where the store's lm-eval reader is) reads them back:
the wall-time ratio per pair, and the share of items whose acc_norm prediction agrees, with
the largest log-likelihood gap. `--device cpu` is the dry run (the 8B shape scaled down,
a few items).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for path in (REPO, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
ITEMS_FILE = REPO / "build" / "lmeval_items.jsonl"  # 300 ARC-Easy test items, not committed
WHEELS = REPO / "build" / "wheels-lmeval"
TASK = "arc_easy_bench"


def write_task(tasks: Path, items: Path) -> None:
    """bench_runner's cloze task over `items` (lm-eval's own `cloze_qa`)."""
    from bench_runner import lmeval_task_yaml

    tasks.mkdir(parents=True, exist_ok=True)
    (tasks / f"{TASK}.yaml").write_text(lmeval_task_yaml(TASK, items))


def timed(argv: list[str], log: Path, env: dict) -> float:
    """Wall seconds of a whole command, its output appended to `log`; fails on an error."""
    started = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... exited {done.returncode}: see {log}")
    return time.perf_counter() - started


def build_model(device: str, folder: Path) -> Path:
    """llama3-8b's shape, random bf16 weights, saved as a transformers folder."""
    from gpu_check_models import build_eight_b, save_folder, shipped_tokenizer

    loaded = build_eight_b("llama3-8b", device, shipped_tokenizer(),
                           scaled=not device.startswith("cuda"))
    return save_folder(loaded, folder)


def run(args) -> int:
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.items.is_file():
        raise SystemExit(f"no items at {args.items}: run `make gpu-lmeval-items` beside "
                         "../shared/benchmarks and carry build/")
    work = Path(tempfile.mkdtemp(prefix="gpu-lmeval-"))
    try:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "FRAGILITY_CACHE_DIR": str(work / "cache"),
               "HF_DATASETS_CACHE": str(work / "datasets"), "PYTHONPATH": str(REPO)}
        started = time.perf_counter()
        folder = build_model(args.device, work / "model")
        built = time.perf_counter() - started
        items = work / "items.jsonl"
        lines = args.items.read_text().splitlines()[:args.count]
        items.write_text("\n".join(lines) + "\n")
        write_task(work / "tasks", items)
        lmeval_env = {**env, "PYTHONPATH": os.pathsep.join(
            [str(args.lmeval_site)] if args.lmeval_site else [])}
        dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
        ours_cmd = [sys.executable, str(Path(__file__).resolve()), "ours", "--model",
                    str(folder), "--items", str(items), "--device", args.device]
        # the runner hashes a model's weights once (cached by size and time): not timed
        timed(ours_cmd + ["--out", str(work / "warm-up.json")], out / "lmeval.log", env)
        pairs = []
        for pair in range(1, args.repeats + 1):
            lm_out = work / f"lmeval-{pair}"
            lm_s = timed([sys.executable, "-m", "lm_eval", "run", "--model", "hf",
                          "--model_args", f"pretrained={folder},dtype={dtype}",
                          "--device", args.device, "--include_path", str(work / "tasks"),
                          "--tasks", TASK, "--batch_size", args.lmeval_batch, "--seed", "0",
                          "--log_samples", "--output_path", str(lm_out)],
                         out / "lmeval.log", lmeval_env)
            ours_s = timed(ours_cmd + ["--out", str(out / f"ours-{pair}.json")],
                           out / "lmeval.log", env)
            pairs.append({"lmeval_s": round(lm_s, 2), "ours_s": round(ours_s, 2),
                          "ratio": round(ours_s / lm_s, 3)})
            print(f"pair {pair}: lm-eval {lm_s:.1f} s, ours {ours_s:.1f} s "
                  f"({ours_s / lm_s:.3f}x)", flush=True)
        samples = sorted(lm_out.rglob(f"samples_{TASK}_*.jsonl"))
        if not samples:
            raise SystemExit(f"lm-eval wrote no samples under {lm_out}")
        shutil.copy(samples[-1], out / "lmeval-samples.jsonl")
        shutil.copy(items, out / "items.jsonl")
        import torch

        (out / "lmeval.json").write_text(json.dumps({
            "device": args.device, "gpu": torch.cuda.get_device_name()
            if args.device.startswith("cuda") else None, "items": len(lines),
            "lmeval_batch": args.lmeval_batch, "model": "llama3-8b shape, random bf16",
            "model_build_s": round(built, 1), "pairs": pairs}, indent=1) + "\n")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ours(args) -> int:
    """The runner on the folder and items, cloze_qa, at the budget a run starts with: one
    process, as timed by `run`; writes {item uid: [pred, scores]}."""
    from fragility_tui.items.loaders import load_items
    from gpu_check_runs import score_pass
    from runners.backends.transformers.memory import initial_budget
    from runners.backends.transformers.scoring import Scorer
    from runners.models.prepare import load_spec
    from runners.plan.budget import RAMP_STEPS, TokenBudget

    dtype = "bf16" if args.device.startswith("cuda") else "fp32"
    loaded = load_spec(str(args.model), dtype=dtype, device=args.device)
    scorer = Scorer(loaded.model, loaded.tokenizer, loaded.eos_ids)
    budget = initial_budget(scorer.kv_bytes_per_token, args.device, loaded.model.config, 2)
    items = load_items(args.items, per_benchmark=None)[0]
    ramp = RAMP_STEPS if args.device.startswith("cuda") else 0
    done = score_pass(loaded, scorer, items, ["cloze_qa"],
                      TokenBudget(budget.tokens, "gpu-lmeval", ramp=ramp))
    cells = {uid: [cell.pred, list(cell.scores)] for (uid, _), cell in done.cells.items()}
    args.out.write_text(json.dumps({"seconds_scoring": round(done.seconds, 3),
                                    "tokens": done.tokens, "cells": cells}) + "\n")
    return 0


def compare(args) -> int:
    """Agreement and the ratios, from what `run` wrote into --out."""
    from fragility_tui.items.loaders import load_items
    from fragility_tui.store.lmeval import ItemMatcher, predict, read_samples

    figures = json.loads((args.out / "lmeval.json").read_text())
    items = load_items(args.out / "items.jsonl", per_benchmark=None)[0]
    matcher, theirs = ItemMatcher(items), {}
    for sample in read_samples(args.out / "lmeval-samples.jsonl"):
        item = matcher.match(sample)
        theirs[item.item_uid] = predict(item, sample, "acc_norm")
    last = len(figures["pairs"])
    cells = json.loads((args.out / f"ours-{last}.json").read_text())["cells"]
    same = sum(cells[uid][0] == pred for uid, (pred, _) in theirs.items())
    gap = max(abs(a - b) for uid, (_, lls) in theirs.items()
              for a, b in zip(lls, cells[uid][1]))
    ratios = sorted(p["ratio"] for p in figures["pairs"])
    print(f"{figures['items']} ARC-Easy items, cloze_qa, {figures['model']}, on "
          f"{figures['gpu'] or figures['device']}; lm-eval --batch_size "
          f"{figures['lmeval_batch']}")
    for number, pair in enumerate(figures["pairs"], start=1):
        print(f"  pair {number}: lm-eval {pair['lmeval_s']} s, ours {pair['ours_s']} s "
              f"({pair['ratio']}x)")
    print(f"  ours / lm-eval wall time: median {ratios[len(ratios) // 2]}x "
          f"({ratios[0]}-{ratios[-1]}x)")
    print(f"  same acc_norm prediction on {same}/{len(theirs)} items; largest "
          f"log-likelihood gap {gap:.2g}")
    return 0


def write_items(path: Path = ITEMS_FILE, count: int = 300) -> int:
    """bench_runner's 300 ARC-Easy test items (seeded sample) for the box."""
    from bench_runner import arc_easy_items

    path.parent.mkdir(parents=True, exist_ok=True)
    return len(arc_easy_items(path, count))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    job = sub.add_parser("run", help="on the GPU box: both harnesses, back to back")
    job.add_argument("--out", type=Path, required=True)
    job.add_argument("--items", type=Path, default=ITEMS_FILE)
    job.add_argument("--count", type=int, default=300)
    job.add_argument("--device", default="cuda")
    job.add_argument("--repeats", type=int, default=2, help="(lm-eval, ours) pairs")
    job.add_argument("--lmeval-batch", default="auto", help="lm-eval's --batch_size")
    job.add_argument("--lmeval-site", type=Path, default=None,
                     help="where lm-eval's wheels were unpacked (pip install --target)")
    one = sub.add_parser("ours", help="the runner's side, one process (run starts it)")
    one.add_argument("--model", type=Path, required=True)
    one.add_argument("--items", type=Path, required=True)
    one.add_argument("--device", default="cuda")
    one.add_argument("--out", type=Path, required=True)
    back = sub.add_parser("compare", help="here: agreement and ratios from run's --out")
    back.add_argument("--out", type=Path, required=True)
    sub.add_parser("write-items", help=f"write {ITEMS_FILE.relative_to(REPO)} from ../shared")
    args = parser.parse_args(argv)
    if args.command == "write-items":
        print(f"wrote {write_items()} items to {ITEMS_FILE}")
        return 0
    return {"run": run, "ours": ours, "compare": compare}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
