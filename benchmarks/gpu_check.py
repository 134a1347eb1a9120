"""`make gpu-check`: what a first GPU run needs to know, in one table, offline, in minutes.

Built for the reference air-gapped box (docs/runner.md, *The reference air-gapped box*): one
H200, no network, torch and transformers preinstalled, no duckdb, textual, platformdirs, gguf,
optimum-quanto or vLLM. It downloads and converts nothing: every model is built in-process
(benchmarks/gpu_check_models.py) and the items are 400 real ones (../shared/benchmarks, or
on the box the build/gpu_check_items.jsonl that --write-items made and the job carried).
Sections, each guarded so one failure is a FAIL row
and the rest still runs:

- versions: Python, torch, CUDA, cuDNN, transformers, vLLM, optimum-quanto, the GPU, SDPA
  kernels, the allocator;
- families: a tiny random model of each family (tests/runners/family_cases.py, the family
  tests' own cases) in bf16 against the plain loop: every differing prediction must be a
  bf16 near-tie (runners/plan/numerics.py);
- llama3-8b and qwen3-8b: a random-weight model of the real config, built on the device in
  bf16, generation capped at a real instruct model's length: batch invariance (four
  budgets and a shuffled order against the real budget in item order; every flip a bf16
  near-tie), throughput at the real budget against a dense forward of 64 x 512 tokens and
  the projected wall time of 3,679 items x 26 configs; for llama3-8b also the peak memory
  of a full-size batch against the budget's estimate and out-of-memory recovery at the
  real budget under a memory cap the batch cannot fit;
- quanto int8 / int4 and vLLM (prefix caching on and off, each engine in its own process):
  SKIP with the reason where the wheel is missing.

`--device cpu` (`make gpu-check DEVICE=cpu`) is the dry run: the same code on 2 families,
a few items, 4 configs, the 8B configs scaled down (gpu_check_models.SCALED_FOR_CPU) and
the out-of-memory injected; tests/runners/test_gpu_check_dry_run.py runs it.

Writes `gpu-check.json` and `gpu-check.md` into `--out DIR`; exit status 1 when a row says
FAIL, 2 when `--device cuda` finds no GPU.

The table is rewritten after every section, so a job killed at its time limit still
brings back the rows done; `--deadline SECONDS` starts no section after that time.

usage: python benchmarks/gpu_check.py [--device cuda|cpu] [--out DIR] [--items N]
                                      [--deadline SECONDS]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for path in (REPO, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
SHARED = REPO.parent / "shared" / "benchmarks"
BENCHMARK_FILES = ("arc_challenge_test", "hellaswag_val", "mmlu_test", "truthfulqa_mc1")
# 400 real items that travel with the check (233 KB; the GPU box has no ../shared, and
# real benchmark data is not committed here): 100 per benchmark, round robin, so prompt
# lengths are the real mix's (~1,480 unique tokens an item), not the starter items' (~850).
# `python benchmarks/gpu_check.py --write-items` writes them where ../shared exists; the
# job carries build/ (ignored by git) to the box.
ITEMS_FILE = REPO / "build" / "gpu_check_items.jsonl"
PER_BENCHMARK = 100
ITEMS = {"cuda": 400, "cpu": 4}  # on a GPU: every one of them


def round_robin(per_benchmark: int):
    """`per_benchmark` items of each benchmark (seeded sample), interleaved."""
    from fragility_tui.items.loaders import load_items as load

    groups = [load(SHARED / f"{name}.jsonl", per_benchmark=per_benchmark, seed=0)[0]
              for name in BENCHMARK_FILES]
    return [it for group in zip(*groups) for it in group]


def write_items(path: Path | None = None) -> int:
    import json

    path = path or ITEMS_FILE
    items = round_robin(PER_BENCHMARK)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(it.to_json()) + "\n" for it in items))
    return len(items)


def load_items(count: int, cuda: bool = True):
    """The first `count` of the 400 real items: from ../shared/benchmarks where it exists,
    else the file --write-items wrote (on the box). No starter-item fallback on a GPU; the
    CPU dry run, which checks paths, not figures, takes the starter items there."""
    from fragility_tui.items.loaders import load_items as load

    if SHARED.is_dir():
        items, source = round_robin(PER_BENCHMARK), "../shared/benchmarks"
    elif ITEMS_FILE.is_file():
        items, source = load(ITEMS_FILE, per_benchmark=None)[0], "build/" + ITEMS_FILE.name
    elif not cuda:
        starter = REPO / "sample_grids" / "starter_items.jsonl"
        items, source = load(starter, per_benchmark=None)[0], "sample_grids/starter_items.jsonl"
    else:
        raise SystemExit(f"gpu-check: no real items: neither {SHARED} nor {ITEMS_FILE}; run "
                         "`python benchmarks/gpu_check.py --write-items` beside "
                         "../shared/benchmarks and carry build/ with the job")
    if count > len(items):
        raise SystemExit(f"gpu-check: --items {count}: {source} gives {len(items)}")
    return items[:count], source


def check_configs(device: str) -> list[str]:
    """All 26 on a GPU; two generation and two cloze configs in the dry run."""
    from fragility_tui.harness.configs import CONFIG_IDS, get_config

    if device.startswith("cuda"):
        return list(CONFIG_IDS)
    return list(CONFIG_IDS[:2]) + [c for c in CONFIG_IDS
                                   if get_config(c).scoring == "likelihood"][:2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the check) or cpu (dry run)")
    parser.add_argument("--out", type=Path, default=Path("gpu-check-out"),
                        help="folder for gpu-check.json and gpu-check.md (gpu-check-out)")
    parser.add_argument("--items", type=int, default=None,
                        help=f"items loaded ({ITEMS['cuda']} on cuda, {ITEMS['cpu']} on cpu)")
    parser.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                        help="start no section after this many seconds (SKIP rows instead), "
                             "so a job with a time limit still writes its table")
    parser.add_argument("--only", default=None, metavar="SECTION[,SECTION]",
                        help="run only these sections (families, llama3-8b, qwen3-8b, quanto, "
                             "vllm; versions always): a short job re-checking one of them")
    parser.add_argument("--write-items", action="store_true",
                        help=f"write build/{ITEMS_FILE.name} from ../shared/benchmarks and stop")
    args = parser.parse_args(argv)
    if args.write_items:
        print(f"wrote {write_items()} items to {ITEMS_FILE}")
        return 0
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    from runners.backends.base import configure_allocator

    from runners.backends.transformers import configure_device

    configure_allocator()  # as a run does, before CUDA is first used
    configure_device(args.device, os.environ)  # as a run does: on CUDA, cuDNN's SDPA left out
    import torch

    from gpu_check_extras import quanto, vllm
    from gpu_check_models import build_eight_b, save_folder, shipped_tokenizer
    from gpu_check_report import Report
    from gpu_check_sections import eight_b, families, versions

    device = args.device
    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("gpu-check: no CUDA device here; `make gpu-check DEVICE=cpu` is the dry run")
        return 2
    torch.manual_seed(0)
    if not cuda:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    started = time.perf_counter()
    report = Report(device, args.out, args.deadline,
                    only=set(args.only.split(",")) | {"versions"} if args.only else None)
    configs = check_configs(device)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    # The runner's file-digest cache in the check's own folder: nothing is written outside
    # it, and platformdirs (which names the user's cache folder) is not on the GPU box.
    os.environ.setdefault("FRAGILITY_CACHE_DIR", str(work / "cache"))
    print(f"gpu-check on {device}", flush=True)
    report.guarded("versions", versions, device)
    items, source = load_items(args.items or ITEMS["cuda" if cuda else "cpu"], cuda)
    report.row("items", f"{len(items)} from {source}; {len(configs)} configs")
    report.guarded("families", families, device, work, configs)
    report.guarded("llama3-8b", eight_b, device, items, configs, "llama3-8b", memory=True)
    report.guarded("qwen3-8b", eight_b, device, items, configs, "qwen3-8b", memory=False)
    report.guarded("quanto", quanto, device, items, configs, work)

    def small_model(folder):  # what each vLLM engine opens: a scaled-down llama3-8b
        loaded = build_eight_b("llama3-8b", device, shipped_tokenizer(), scaled=True)
        return save_folder(loaded, folder / "llama3-8b-scaled")

    report.guarded("vllm", vllm, device, items[:8], configs, work, small_model)
    report.section = "total"
    report.row("wall time", f"{time.perf_counter() - started:.0f} s")
    paths = report.write(args.out)
    print("\n" + report.markdown())
    print("written: " + ", ".join(map(str, paths)))
    if report.failed:
        print(f"gpu-check FAILED: {'; '.join(report.failed)}")
        return 1
    print("gpu-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
