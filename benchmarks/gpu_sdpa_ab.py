"""A/B on the GPU: the runner's tree-masked attention through cuDNN's SDPA kernel (torch's
first choice on Hopper with a mask) against the same calls with cuDNN's SDPA disabled
(memory-efficient kernel). Found by benchmarks/gpu_profile.py: cuDNN builds an execution plan
for every new shape, 1.3 ms of host time a call, and a run's shapes change every call.
Each pass takes fresh items (new shapes, as in a run), A B A B, after a warm-up.

usage: python benchmarks/gpu_sdpa_ab.py [--device cuda|cpu] [--out DIR] [--per-pass N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE.parent, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=Path("gpu-sdpa-out"))
    parser.add_argument("--per-pass", type=int, default=60)
    args = parser.parse_args(argv)
    from runners.backends.base import configure_allocator

    configure_allocator()
    import torch

    from gpu_check import load_items
    from gpu_check_models import (GENERATION_CAP, build_eight_b, shipped_tokenizer,
                                  stopping_unevenly)
    from gpu_check_runs import score_pass
    from gpu_check_sections import budget_of
    from gpu_profile import config_groups
    from runners.backends.transformers.memory import initial_budget
    from runners.backends.transformers.scoring import Scorer
    from runners.plan.budget import RAMP_STEPS

    cuda = args.device.startswith("cuda")
    loaded = build_eight_b("llama3-8b", args.device, shipped_tokenizer(), scaled=not cuda)
    scorer = stopping_unevenly(Scorer)(loaded.model, loaded.tokenizer, loaded.eos_ids,
                                       max_new_tokens=GENERATION_CAP)
    budget = initial_budget(scorer.kv_bytes_per_token, args.device, loaded.model.config, 2,
                            max_new_tokens=GENERATION_CAP).tokens
    n = args.per_pass
    items, _ = load_items(16 + 4 * n)
    configs = config_groups()["all"]
    score_pass(loaded, scorer, items[:16], configs, budget_of(budget))  # warm-up
    rows = []
    for index, cudnn in enumerate((True, False, True, False)):
        if cuda:
            torch.backends.cuda.enable_cudnn_sdp(cudnn)
        chunk = items[16 + index * n: 16 + (index + 1) * n]
        done = score_pass(loaded, scorer, chunk, configs,
                          budget_of(budget, RAMP_STEPS if cuda else 0))
        rows.append({"cudnn_sdpa": cudnn, "items": len(chunk), "seconds": round(done.seconds, 2),
                     "tokens": done.tokens, "tokens_per_s": round(done.tokens_per_s)})
        print(rows[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu-sdpa-ab.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
