"""A/B of the scorer against an earlier revision of runners/scoring.py, same process.

Written for the batched output head (one vocabulary projection per batch instead of one per
tree node), whose baseline is the revision before it, 134da6b. Both scorers score the same
requests alternately (A B A B); the ratio of summed times is the figure to quote.

usage: python benchmarks/bench_output_head.py [--model gemma3-270m] [--baseline-rev 134da6b]
       [--items 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def load_scorer_at(revision: str):
    source = subprocess.run(["git", "show", f"{revision}:runners/scoring.py"], cwd=REPO,
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "baseline_scoring.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_scoring", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while exec runs
    spec.loader.exec_module(module)
    return module.Scorer


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--baseline-rev", default="134da6b")
    parser.add_argument("--items", type=int, default=4, help="starter items (one batch)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import torch

    from fragility_tui.grid.configs import CONFIG_IDS
    from fragility_tui.grid.loaders import load_items
    from runners.models import load_model
    from runners.requests import Encoder, plan_item
    from runners.scoring import Scorer

    try:  # before loading the model: nothing to compare without the baseline
        baseline = load_scorer_at(args.baseline_rev)
    except subprocess.CalledProcessError:  # a shallow clone or an exported tree
        print(f"skipped: revision {args.baseline_rev} is not in this checkout")
        return 0
    torch.set_num_threads(args.threads)
    loaded = load_model(args.model, dtype="fp32", device="cpu")
    items, _ = load_items(REPO / "sample_grids" / "starter_items.jsonl", per_benchmark=None, seed=0)
    encoder = Encoder(loaded.tokenizer, loaded.is_instruct)
    gen, lik = [], []
    for item in items[:args.items]:
        plan_item(encoder, item, list(CONFIG_IDS), 0, gen, lik)
    scorers = {"current": Scorer(loaded.model, loaded.tokenizer, loaded.eos_ids),
               args.baseline_rev: baseline(loaded.model, loaded.tokenizer, loaded.eos_ids)}
    seconds = {name: 0.0 for name in scorers}
    for _ in range(2):
        for name, scorer in scorers.items():
            started = time.perf_counter()
            scorer.score(gen, lik)
            seconds[name] += time.perf_counter() - started
    print(f"{loaded.name}, {args.items} items x {len(CONFIG_IDS)} configs, "
          f"{args.threads} thread(s), 2 rounds each")
    for name, total in seconds.items():
        print(f"  {name}: {total / 2:.1f} s per round")
    print(f"  speed-up of current over {args.baseline_rev}: "
          f"{seconds[args.baseline_rev] / seconds['current']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
