"""One vLLM engine in a process of its own, for benchmarks/gpu_check_extras.py: scores the
check's items forward and reversed and writes what it measured as JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", required=True)
    parser.add_argument("--caching", choices=("on", "off"), required=True)
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--configs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from gpu_check import load_items
    from runners.backends.vllm import load_vllm
    from runners.models.prepare import prepare_model
    from runners.plan.item_requests import Encoder, plan_item
    from runners.run.loop import RunSpec

    spec = RunSpec(models=[args.folder], items=[], grid="gpu-check", dtype="bf16",
                   device="cuda", backend="vllm", prefix_reuse=args.caching == "on")
    prepared = prepare_model(args.folder, dtype="bf16", device="cuda", backend="vllm")
    loaded, scorer = load_vllm(prepared, spec)
    encoder = Encoder(loaded.tokenizer, loaded.is_instruct, loaded.template_args)
    gen, lik = [], []
    for item in load_items(args.items)[0]:
        plan_item(encoder, item, args.configs.split(","), 0, gen, lik)
    started = time.perf_counter()
    forward = scorer.score(gen, lik)
    seconds = time.perf_counter() - started
    backward = scorer.score(gen[::-1], lik[::-1])
    key = "|".join
    Path(args.out).write_text(json.dumps({
        "likelihood_requests": len(lik),
        "reversed_gap": max((abs(forward.loglikelihoods[k][0] - backward.loglikelihoods[k][0])
                             for k in forward.loglikelihoods), default=0.0),
        "tokens_per_s": forward.stats.forwarded / seconds,
        "batch_invariant": loaded.provenance["backend"]["batch_invariant"],
        "loglikelihoods": {key(map(str, k)): v[0] for k, v in forward.loglikelihoods.items()},
        "generations": {key(map(str, k)): g.text for k, g in forward.generations.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
