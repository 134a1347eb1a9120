"""Runner benchmark (`make bench`): SmolLM2-135M-Instruct x 40 real items x 26 configs.

Prints, for the runner's scorer (prefix tree + batched decoding) and the plain reference
loop (runners.reference: one prompt at a time, model.generate / full forwards) measured in
the same process on the same items:
- wall time of each, and the speed-up (goal >= 3x);
- prompt tokens forwarded vs the unique tokens of each item's prompt tree (goal <= 1.15x);
  the runner's tree spans a whole batch, so the chat header shared across items can put
  this below 1.0;
- decode tokens, and how many cells agree.
Ratios are the figures to quote: absolute times depend on the CPU and on its other load.

usage: python benchmarks/bench_runner.py [--per-benchmark 10] [--threads 2] [--batch-size 4]
       [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BENCHMARK_FILES = ("arc_challenge_test", "hellaswag_val", "mmlu_test", "truthfulqa_mc1")


def load_real_items(per_benchmark: int):
    from fragility_tui.grid.loaders import load_items

    folder = REPO.parent / "shared" / "benchmarks"
    if not folder.is_dir():
        sys.exit(f"error: real benchmark data not found at {folder}")
    items = []
    for name in BENCHMARK_FILES:
        part, _ = load_items(folder / f"{name}.jsonl", per_benchmark=per_benchmark, seed=0)
        items += part
    return items


def run_runner(loaded, items, configs, batch_size):
    from runners.prefix_tree import build_tree, count_tokens
    from runners.requests import Encoder, cells_for, plan_item
    from runners.scoring import Scorer, ScoreStats

    scorer = Scorer(loaded.model, loaded.tokenizer, loaded.eos_ids)
    encoder = Encoder(loaded.tokenizer, loaded.is_instruct)
    ordered = sorted(items, key=lambda it: len(it.question) + sum(map(len, it.choices)))
    stats, preds, per_item_unique = ScoreStats(), {}, 0
    t0 = time.perf_counter()
    for start in range(0, len(ordered), batch_size):
        gen, lik = [], []
        plans = []
        for item in ordered[start:start + batch_size]:
            n_gen, n_lik = len(gen), len(lik)
            plans.append(plan_item(encoder, item, configs, 0, gen, lik))
            own = [r.tokens for r in gen[n_gen:]] + [r.tokens for r in lik[n_lik:]]
            per_item_unique += count_tokens(build_tree(own))
        result = scorer.score(gen, lik)
        stats.add(result.stats)
        for plan in plans:
            for row in cells_for(plan, result, loaded.name, None, 0.0):
                preds[(row.item_uid, row.config_id)] = row.pred
    return time.perf_counter() - t0, stats, per_item_unique, preds


def run_reference(loaded, items, configs):
    from runners.reference import reference_cell

    preds, tokens = {}, 0
    t0 = time.perf_counter()
    for item in items:
        for config_id in configs:
            cell = reference_cell(loaded.model, loaded.tokenizer, item, config_id, 0)
            preds[(item.item_uid, config_id)] = (cell.pred, cell.margin)
            tokens += cell.tokens
    return time.perf_counter() - t0, tokens, preds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-benchmark", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4, help="items per batch")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)

    import torch

    from fragility_tui.grid.configs import CONFIG_IDS
    from runners.models import load_model

    torch.set_num_threads(args.threads)
    loaded = load_model("smollm2-135m-instruct", dtype="fp32", device="cpu")
    items = load_real_items(args.per_benchmark)
    configs = list(CONFIG_IDS)
    fast_s, stats, per_item_unique, fast_preds = run_runner(loaded, items, configs, args.batch_size)
    plain_s, plain_tokens, plain_preds = run_reference(loaded, items, configs)
    agree = 0
    for key, (pred, margin) in plain_preds.items():
        if fast_preds[key] == pred:
            agree += 1
        else:
            print(f"  differs: {key} runner {fast_preds[key]} reference {pred} "
                  f"(reference top-two gap {margin:.2e})", flush=True)
    figures = {
        "model": loaded.name, "items": len(items), "configs": len(configs),
        "cells": len(plain_preds), "threads": args.threads, "batch_size": args.batch_size,
        "runner_s": round(fast_s, 2), "reference_s": round(plain_s, 2),
        "speedup": round(plain_s / fast_s, 2),
        "prompt_tokens_forwarded": stats.prompt_tokens,
        "unique_tokens_per_item_trees": per_item_unique,
        "forwarded_vs_unique": round(stats.prompt_tokens / per_item_unique, 3),
        "prompt_tokens_without_reuse": stats.total_prompt_tokens,
        "decode_tokens": stats.decode_tokens,
        "runner_tokens_total": stats.forwarded, "reference_tokens_total": plain_tokens,
        "cells_agreeing": agree,
    }
    print(f"SmolLM2-135M-Instruct x {len(items)} items x {len(configs)} configs "
          f"({len(plain_preds)} cells), {args.threads} threads, {args.batch_size} items/batch")
    print(f"  wall time: runner {fast_s:.1f} s, plain reference {plain_s:.1f} s -> "
          f"speed-up {plain_s / fast_s:.2f}x (goal >= 3x)")
    print(f"  prompt tokens forwarded {stats.prompt_tokens} vs unique tokens of the items' "
          f"prompt trees {per_item_unique}: {stats.prompt_tokens / per_item_unique:.3f}x "
          f"(goal <= 1.15x); without reuse {stats.total_prompt_tokens} "
          f"({stats.total_prompt_tokens / per_item_unique:.2f}x)")
    print(f"  decode tokens {stats.decode_tokens}; all tokens forwarded: runner "
          f"{stats.forwarded}, reference {plain_tokens} "
          f"({plain_tokens / max(stats.forwarded, 1):.2f}x fewer)")
    print(f"  cells with the same prediction: {agree}/{len(plain_preds)}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
