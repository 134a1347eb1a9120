"""Runner throughput of one source tree against another on the same GPU, items and model
(issue 59 item 7: "A/B in one job, the code before and after").

Runs in the tree given by --tree (its runners, fragility_tui and benchmarks modules are
imported from there, so an older checkout is measured with its own code), on the workload
of this file's own gpu_check_models (the same model, generation length and stops for
either tree): a random-weight llama3-8b in bf16 built on the device, the real budget from
that tree's memory model, a 16-item warm-up pass, then one timed pass of every item in
--items x 26 configs at the real budget with the GPU ramp, planned on the host thread
(what both trees can do). Each tree runs in its own process, one after the other, in the
same job:

    make gpu-check-ab-tree    # where git is: build/ab-before, the runner at 70ee9f2
    python3 benchmarks/gpu_ab.py --tree build/ab-before --items build/gpu_check_items.jsonl --out before.json
    python3 benchmarks/gpu_ab.py --tree .      --items build/gpu_check_items.jsonl --out after.json

`--device cpu` is the dry run (the 8B shape scaled down, 4 configs, the items given).
Writes one JSON object (and prints it): seconds, tokens, tokens/s, batches, seconds per
item and the projection to 3,679 items x 26 configs, and the tokens fed back per
generation cell (the workload's uneven stops, as the check reports them).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

FULL_GRID_ITEMS = 3679


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="the source tree measured")
    parser.add_argument("--items", type=Path, required=True, help="items (JSONL)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--count", type=int, default=None, help="items used (default: all)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file written")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    if not (tree / "runners").is_dir():
        parser.error(f"--tree {tree}: no runners/ there")
    for path in (tree / "benchmarks", tree):
        sys.path.insert(0, str(path))
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if "FRAGILITY_CACHE_DIR" not in os.environ:  # the runner's digest cache, removed at exit
        cache = tempfile.mkdtemp(prefix="gpu-ab-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
        os.environ["FRAGILITY_CACHE_DIR"] = cache
    from runners.backends.base import configure_allocator
    from runners.backends.transformers import configure_device

    configure_allocator()
    configure_device(args.device, os.environ)
    import torch

    from fragility_tui.harness.configs import CONFIG_IDS, get_config
    from fragility_tui.items.loaders import load_items
    from gpu_check_runs import score_pass
    from runners.backends.transformers.memory import initial_budget
    from runners.backends.transformers.scoring import Scorer
    from runners.plan.budget import RAMP_STEPS, TokenBudget

    workload = driver_module("gpu_check_models")
    GENERATION_CAP, build_eight_b = workload.GENERATION_CAP, workload.build_eight_b
    shipped_tokenizer, stopping_unevenly = (workload.shipped_tokenizer,
                                            workload.stopping_unevenly)
    cuda = args.device.startswith("cuda")
    items = load_items(args.items, per_benchmark=None)[0][:args.count]
    configs = list(CONFIG_IDS) if cuda else list(CONFIG_IDS[:2]) + [
        c for c in CONFIG_IDS if get_config(c).scoring == "likelihood"][:2]
    started = time.perf_counter()
    loaded = build_eight_b("llama3-8b", args.device, shipped_tokenizer(), scaled=not cuda)
    scorer = stopping_unevenly(Scorer)(loaded.model, loaded.tokenizer, loaded.eos_ids,
                    max_new_tokens=GENERATION_CAP)
    real = initial_budget(scorer.kv_bytes_per_token, args.device, loaded.model.config, 2,
                          max_new_tokens=GENERATION_CAP).tokens
    ramp = RAMP_STEPS if cuda else 0
    built = time.perf_counter() - started
    score_pass(loaded, scorer, items[:16], configs, TokenBudget(real, "gpu-ab", ramp=ramp))
    done = score_pass(loaded, scorer, items, configs, TokenBudget(real, "gpu-ab", ramp=ramp))
    per_item = done.seconds / len(items) * 26 / len(configs)
    generation_cells = len(items) * sum(get_config(c).scoring == "generate" for c in configs)
    result = {"tree": str(args.tree), "device": args.device,
              "gpu": torch.cuda.get_device_name() if cuda else None,
              "items": len(items), "configs": len(configs), "budget_tokens": real,
              "seconds": round(done.seconds, 2), "tokens": done.tokens,
              "tokens_per_s": round(done.tokens_per_s), "batches": done.batches,
              "seconds_per_item": round(per_item, 4),
              "projected_full_grid_min": round(per_item * FULL_GRID_ITEMS / 60, 2),
              "build_and_budget_s": round(built, 1),
              "decode_tokens_per_generation_cell": round(
                  done.stats.decode_tokens / generation_cells, 2) if done.stats else None}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


def driver_module(name: str):
    """This file's sibling module `name`, whatever tree comes first on the path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"gpu_ab_{name}", Path(__file__).resolve().parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())
