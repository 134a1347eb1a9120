"""Where the runner's time goes on a GPU: the 8B-config model of `make gpu-check` (random
bf16 weights, generation cells ending unevenly up to GENERATION_CAP) scored the way the
check scores it, split three ways, with one profiled pass.

- all 26 configs, generation configs only, likelihood configs only: wall time, tokens
  forwarded, prefill and decode calls (ScoreStats), so the decode loop's share is known;
- the prefill constants (CONSTANT_VARIANTS) on the whole pass;
- a torch.profiler pass: the share of the wall time the GPU is busy, the kernels that take
  it, and the host operations between them (syncs, copies, launches).

Writes gpu-profile.json and gpu-profile.md into --out. `--device cpu` is the dry run (the
config scaled down, a few items), which tests/runners/test_gpu_check_parts.py runs.

usage: python benchmarks/gpu_profile.py [--device cuda|cpu] [--out DIR] [--model llama3-8b]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE.parent, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
SIZES = {"cuda": {"items": 128, "profiled": 32, "warm": 16},
         "cpu": {"items": 2, "profiled": 1, "warm": 1}}


def config_groups() -> dict[str, list[str]]:
    from fragility_tui.harness.configs import CONFIGS

    return {"all": [c.config_id for c in CONFIGS],
            "generation": [c.config_id for c in CONFIGS if c.scoring == "generate"],
            "likelihood": [c.config_id for c in CONFIGS if c.scoring == "likelihood"]}


def timed_passes(loaded, scorer, items, budget_tokens: int) -> dict:
    from gpu_check_runs import score_pass
    from gpu_check_sections import budget_of
    from runners.plan.budget import RAMP_STEPS

    ramp = RAMP_STEPS if loaded.device.startswith("cuda") else 0
    rows = {}
    for name, configs in config_groups().items():
        done = score_pass(loaded, scorer, items, configs, budget_of(budget_tokens, ramp))
        rows[name] = {"configs": len(configs), "seconds": round(done.seconds, 2),
                      "tokens_per_s": round(done.tokens_per_s), "batches": done.batches,
                      **{k: v for k, v in vars(done.stats).items() if k != "seconds"}}
    return rows


# prefill constants tried on the whole pass (runners/backends/transformers/prefill.py:
# DEVICE_CONSTANTS; CUDA's 512 / 1,024 are a documented choice until measured)
CONSTANT_VARIANTS = ((512, 1024), (128, 1024), (2048, 1024), (512, 4096))


def constant_sweep(loaded, scorer, items, budget_tokens: int) -> list:
    from gpu_check_runs import score_pass
    from gpu_check_sections import budget_of
    from runners.backends.transformers.prefill import PrefillConstants

    chosen, rows = scorer.prefill_constants, []
    try:
        for overhead, chunk in CONSTANT_VARIANTS:
            scorer.prefill_constants = PrefillConstants(overhead, chunk)
            done = score_pass(loaded, scorer, items, config_groups()["all"],
                              budget_of(budget_tokens))
            rows.append({"forward_overhead_tokens": overhead, "chunk_rows": chunk,
                         "seconds": round(done.seconds, 2), "tokens_per_s": round(done.tokens_per_s),
                         "prefill_calls": done.stats.prefill_calls,
                         "prompt_padding": done.stats.prompt_padding})
    finally:
        scorer.prefill_constants = chosen
    return rows


def profiled_pass(loaded, scorer, items, budget_tokens: int, top: int = 15) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from gpu_check_runs import score_pass
    from gpu_check_sections import budget_of

    cuda = loaded.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        done = score_pass(loaded, scorer, items, config_groups()["all"], budget_of(budget_tokens))
    events = prof.key_averages()
    device_us = sum(e.self_device_time_total for e in events
                    if e.device_type == torch.autograd.DeviceType.CUDA) if cuda else 0.0

    def table(key):
        chosen = sorted(events, key=lambda e: getattr(e, key), reverse=True)[:top]
        return [{"name": e.key[:90], "count": e.count, "ms": round(getattr(e, key) / 1e3, 1)}
                for e in chosen if getattr(e, key) > 0]

    return {"items": len(items), "seconds": round(done.seconds, 2),
            "device_busy_s": round(device_us / 1e6, 2),
            "device_busy_share": round(device_us / 1e6 / done.seconds, 3) if cuda else None,
            "top_device_kernels": table("self_device_time_total") if cuda else [],
            "top_host_ops": table("self_cpu_time_total")}


def markdown(document: dict) -> str:
    lines = [f"# gpu-profile on {document['device']}: {document['model']}", "",
             f"{document['started_utc']}, {document['seconds']} s; budget "
             f"{document['budget_tokens']} tokens, generation cap {document['generation_cap']}",
             "", "| configs | n | s | tokens/s | batches | prompt tok | pad | decode tok | "
             "decode pad | prefill calls | decode calls |", "|---|---:|---:|---:|---:|---:|---:|"
             "---:|---:|---:|---:|"]
    for name, r in document["passes"].items():
        lines.append(f"| {name} | {r['configs']} | {r['seconds']} | {r['tokens_per_s']} | "
                     f"{r['batches']} | {r['prompt_tokens']} | {r['prompt_padding']} | "
                     f"{r['decode_tokens']} | {r['decode_padding']} | {r['prefill_calls']} | "
                     f"{r['decode_calls']} |")
    lines += ["", "| forward overhead tokens | chunk rows | s | tokens/s | prefill calls | "
              "padding |", "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['forward_overhead_tokens']} | {r['chunk_rows']} | {r['seconds']} | "
              f"{r['tokens_per_s']} | {r['prefill_calls']} | {r['prompt_padding']} |"
              for r in document["prefill_constants"]]
    p = document["profile"]
    lines += ["", f"Profiled pass: {p['items']} items x 26 configs, {p['seconds']} s wall, "
              f"device busy {p['device_busy_s']} s (share {p['device_busy_share']})", ""]
    for title, key in (("device kernels", "top_device_kernels"), ("host ops", "top_host_ops")):
        lines += [f"| {title} | count | ms |", "|---|---:|---:|"]
        lines += [f"| {e['name'].replace('|', '/')} | {e['count']} | {e['ms']} |" for e in p[key]]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=Path("gpu-profile-out"))
    parser.add_argument("--model", default="llama3-8b", choices=("llama3-8b", "qwen3-8b"))
    args = parser.parse_args(argv)
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    from runners.backends.base import configure_allocator

    configure_allocator()
    from runners.backends.transformers import configure_device

    configure_device(args.device, os.environ)  # as a run does: on CUDA, cuDNN's SDPA left out
    import torch

    from gpu_check import load_items
    from gpu_check_models import (GENERATION_CAP, build_eight_b, shipped_tokenizer,
                                  stopping_unevenly)
    from runners.backends.transformers.memory import initial_budget
    from runners.backends.transformers.scoring import Scorer

    cuda = args.device.startswith("cuda")
    size = SIZES["cuda" if cuda else "cpu"]
    started, stamp = time.perf_counter(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    loaded = build_eight_b(args.model, args.device, shipped_tokenizer(), scaled=not cuda)
    scorer = stopping_unevenly(Scorer)(loaded.model, loaded.tokenizer, loaded.eos_ids,
                    max_new_tokens=GENERATION_CAP)
    budget = initial_budget(scorer.kv_bytes_per_token, args.device, loaded.model.config, 2,
                            max_new_tokens=GENERATION_CAP).tokens
    items, _ = load_items(size["items"])
    timed_passes(loaded, scorer, items[:size["warm"]], budget)  # kernels chosen, memory taken
    document = {"device": torch.cuda.get_device_name() if cuda else "cpu",
                "model": loaded.name, "started_utc": stamp, "budget_tokens": budget,
                "generation_cap": GENERATION_CAP, "torch": torch.__version__,
                "passes": timed_passes(loaded, scorer, items, budget),
                "prefill_constants": constant_sweep(loaded, scorer, items, budget),
                "profile": profiled_pass(loaded, scorer, items[:size["profiled"]], budget)}
    document["seconds"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu-profile.json").write_text(json.dumps(document, indent=1) + "\n")
    (args.out / "gpu-profile.md").write_text(markdown(document))
    print(markdown(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
