"""A/B of a quantised build on CPU: quanto's per-call de-quantisation vs de-quantising once.

Loads SmolLM2-135M-Instruct twice with the same quanto scheme: once as optimum-quanto leaves
it (every forward de-quantises every weight), once as the runner runs it
(runners.models.quantized.dequantize_once). Both score the same starter items alternately; the
script checks that their log-likelihoods and generations are identical and prints the
speed-up (ratio of summed times in this process).

usage: python benchmarks/bench_quantized.py [--scheme int4] [--items 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", choices=["int8", "int4"], default="int4")
    parser.add_argument("--items", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import torch

    from fragility_tui.harness.configs import CONFIG_IDS
    from fragility_tui.items.loaders import load_items
    from runners.models import load as models
    from runners.models.prepare import load_spec
    from runners.plan.item_requests import Encoder, plan_item
    from runners.backends.transformers.scoring import Scorer

    torch.set_num_threads(args.threads)
    once = load_spec("smollm2-135m-instruct", dtype="fp32", device="cpu",
                             quantize=args.scheme)
    # device="cuda" only tells quantize_model not to de-quantise; the model stays on the CPU.
    per_call = load_spec("smollm2-135m-instruct", dtype="fp32", device="cpu")
    models.quantize_model(per_call.model, args.scheme, device="cuda")
    items, _ = load_items(REPO / "sample_grids" / "starter_items.jsonl", per_benchmark=None,
                          seed=0)
    encoder = Encoder(once.tokenizer, once.is_instruct)
    gen, lik = [], []
    for item in items[:args.items]:
        plan_item(encoder, item, list(CONFIG_IDS), 0, gen, lik)
    scorers = {"quanto per call": Scorer(per_call.model, per_call.tokenizer, per_call.eos_ids),
               "de-quantised once": Scorer(once.model, once.tokenizer, once.eos_ids)}
    seconds = {name: 0.0 for name in scorers}
    results = {}
    for _ in range(2):
        for name, scorer in scorers.items():
            started = time.perf_counter()
            results[name] = scorer.score(gen, lik)
            seconds[name] += time.perf_counter() - started
    a, b = results.values()
    same = (a.loglikelihoods == b.loglikelihoods
            and {k: v.text for k, v in a.generations.items()}
            == {k: v.text for k, v in b.generations.items()})
    print(f"SmolLM2-135M-Instruct q{args.scheme}, {args.items} items x {len(CONFIG_IDS)} "
          f"configs, {args.threads} thread(s), 2 rounds each")
    for name, total in seconds.items():
        print(f"  {name}: {total / 2:.1f} s per round")
    print(f"  speed-up: {seconds['quanto per call'] / seconds['de-quantised once']:.2f}x; "
          f"identical results: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
