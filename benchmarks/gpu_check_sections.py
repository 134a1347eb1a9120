"""The GPU check's sections (benchmarks/gpu_check.py runs them in order, each guarded so a
failure is a row, not the end of the table). Sizes per device are in SIZES: the CPU dry run
exercises every path on a few items and a scaled-down 8B config."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from gpu_check_models import (GENERATION_CAP, build_eight_b, shipped_tokenizer,
                              stopping_unevenly)
from gpu_check_runs import busy_share, count_syncs, dense_rate, flips, near_tie_share, score_pass

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests" / "runners"  # family_cases.py: the family tests' own cases
FULL_GRID = (3679, 26)  # the paper-sized grid: items x configs
# Per device: families run, items per section, the dense yardstick's shape.
SIZES = {
    "cuda": {"families": None, "family_configs": None, "invariance_items": 16,
             "throughput_items": 400, "dense": (64, 512), "fixed_budgets": (512, 4096, 32768),
             "quanto_items": 2},
    "cpu": {"families": ("llama", "gemma3_text"), "family_configs": 4, "invariance_items": 2,
            "throughput_items": 4, "dense": (4, 64), "fixed_budgets": (512, 1024, 4096),
            "quanto_items": 1},
}
# The dry run's second 8B config checks its paths only: one fixed budget, two items.
CPU_SECOND = {"fixed_budgets": (512,), "throughput_items": 2}


def sizes(device: str, second: bool = False) -> dict:
    if device.startswith("cuda"):
        return SIZES["cuda"]
    return {**SIZES["cpu"], **(CPU_SECOND if second else {})}


def family_cases():
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import family_cases
    import tiny_models

    return family_cases, tiny_models


def versions(report, device: str) -> None:
    import importlib.metadata

    import torch

    from runners.backends.vllm import installed_version

    def version(dist):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    cuda = device.startswith("cuda")
    report.row("python", sys.version.split()[0])
    report.row("torch", torch.__version__)
    report.row("CUDA", torch.version.cuda if cuda else f"{torch.version.cuda} (not used: cpu)")
    report.row("cuDNN", torch.backends.cudnn.version() if cuda else "n/a (cpu)")
    report.row("transformers", version("transformers"))
    report.row("vLLM", installed_version() or "not installed")
    report.row("optimum-quanto", version("optimum-quanto"))
    if cuda:
        free, total = torch.cuda.mem_get_info()
        report.row("GPU", f"{torch.cuda.get_device_name()} (capability "
                          f"{'.'.join(map(str, torch.cuda.get_device_capability()))}, "
                          f"{total / 2**30:.0f} GiB, {free / 2**30:.0f} free)")
        kernels = {"flash": torch.backends.cuda.flash_sdp_enabled(),
                   "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                   "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                   "math": torch.backends.cuda.math_sdp_enabled()}
        report.row("SDPA kernels enabled", ", ".join(k for k, on in kernels.items() if on))
        report.row("torch.compile (inductor, Triton)", compile_probe(device))
    report.row("allocator", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"))


# Compiles and runs a fused elementwise kernel on the device: on CUDA inductor emits Triton,
# which needs a working Triton and a C compiler for its launcher (issue 59 item 4: decoder
# layers are compiled only where this works).
COMPILE_PROBE = """
import sys, time, torch
started = time.perf_counter()
f = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + 1)
x = torch.randn(4096, device=sys.argv[1])
assert torch.allclose(f(x), torch.nn.functional.gelu(x) * 2 + 1, atol=1e-5)
print(f"{time.perf_counter() - started:.1f}")
"""


def compile_probe(device: str, timeout: float = 120.0, script: str = COMPILE_PROBE) -> str:
    """Whether torch.compile works on `device`, in a child process with a time-out (a
    compiler that hangs or crashes costs the check nothing more): "works (N s to compile
    and run)", else "no: " and the child's last error line or the time-out."""
    import subprocess

    try:
        done = subprocess.run([sys.executable, "-c", script, device], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"no: timed out after {timeout:.0f} s"
    if done.returncode == 0:
        return f"works ({done.stdout.strip().splitlines()[-1]} s to compile and run)"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return f"no: exit {done.returncode}" + (f", {lines[-1].strip()[:200]}" if lines else "")


def families(report, device: str, work: Path, configs: list) -> None:
    """Each family's tiny model in bf16 on the device against the plain loop (the family
    tests' own comparison): every differing prediction must be a bf16 near-tie."""
    from runners.models.prepare import load_spec

    cases, tiny = family_cases()
    size = sizes(device)
    names = size["families"] or list(cases.FAMILIES)
    chosen = configs[:size["family_configs"]] if size["family_configs"] else None
    tokenizer = tiny.make_tokenizer()
    for model_type in names:
        folder = cases.tiny_folder(work, model_type, tokenizer)
        loaded = load_spec(str(folder), dtype="bf16", device=device)
        got = cases.compare_with_plain_loop(loaded, configs=chosen)
        attention = loaded.model.config._attn_implementation
        report.row(f"{model_type} bf16 vs plain loop",
                   f"{got['cells']} cells, {len(got['flips'])} flips, {len(got['outside'])} "
                   f"outside bf16 near-ties, {got['near_ties']} near-tie cells, largest "
                   f"log-likelihood gap {got['largest_gap']:.3g}, {attention}",
                   "FAIL" if got["outside"] or attention != cases.expected_attention(model_type)
                   else "ok")
        del loaded


def eight_b(report, device: str, items: list, configs: list, name: str,
            memory: bool) -> None:
    """An 8B config's random model in bf16: batch invariance, throughput and its
    projection, and (memory=True) peak memory and out-of-memory recovery."""
    import torch

    from runners.backends.transformers.memory import initial_budget
    from runners.backends.transformers.scoring import Scorer

    cuda, size = device.startswith("cuda"), sizes(device, second=not memory)
    loaded = build_eight_b(name, device, shipped_tokenizer(), scaled=not cuda)
    shape = loaded.provenance
    report.row(f"{name} model", f"{shape['parameters'] / 1e9:.2f} B parameters, "
               f"{shape['layers']} layers, hidden {shape['hidden']}, vocabulary {shape['vocab']}"
               f", random bf16 on {device}" + ("" if cuda else " (scaled down for the CPU)"))
    scorer = stopping_unevenly(Scorer)(loaded.model, loaded.tokenizer, loaded.eos_ids,
                                       max_new_tokens=GENERATION_CAP)
    real = initial_budget(scorer.kv_bytes_per_token, device, loaded.model.config, 2,
                          max_new_tokens=GENERATION_CAP)
    report.row(f"{name} real budget", f"{real.tokens} tokens ({real.source})")
    report.figures.setdefault(name, {})["budget_tokens"] = real.tokens
    invariance(report, loaded, scorer, items[:size["invariance_items"]], configs, real.tokens,
               name, size["fixed_budgets"])
    throughput(report, loaded, scorer, items[:size["throughput_items"]], configs, real.tokens,
               name)
    if memory:
        peak = peak_memory(report, loaded, scorer, items, configs, real.tokens, name)
        oom_recovery(report, loaded, scorer, items, configs, real.tokens, name, peak)
    del scorer, loaded
    if cuda:
        torch.cuda.empty_cache()


def budget_of(tokens: int, ramp: int = 0):
    from runners.plan.budget import TokenBudget

    return TokenBudget(tokens, "gpu-check", ramp=ramp)


def invariance(report, loaded, scorer, items, configs, real: int, name: str,
               budgets: tuple) -> None:
    """The same cells at four budgets and in a shuffled order as at the real budget in
    item order: a flip must be a bf16 near-tie in one of the two passes."""
    reference = score_pass(loaded, scorer, items, configs, budget_of(real))
    report.row(f"{name} reference pass", f"{len(items)} items x {len(configs)} configs at "
               f"{real} tokens; {near_tie_share(reference.cells)}")
    order = list(range(len(items)))
    random.Random(0).shuffle(order)
    for tokens in (*budgets, real):
        other = score_pass(loaded, scorer, items, configs, budget_of(tokens), order=order)
        moved, outside = flips(reference.cells, other.cells)
        report.row(f"{name} shuffled, budget {tokens}",
                   f"{len(moved)} flips, {len(outside)} outside bf16 near-ties, "
                   f"{other.batches} batches; {near_tie_share(other.cells)}",
                   "FAIL" if outside else "ok")


def throughput(report, loaded, scorer, items, configs, real: int, name: str) -> None:
    """Tokens per second at the real budget (ramping up as a GPU run does) against a
    dense decoder forward of the same weights, and the wall time of the full grid."""
    from runners.plan.budget import RAMP_STEPS

    from runners.run.plan_pool import auto_workers

    cuda = loaded.device.startswith("cuda")
    ramp = RAMP_STEPS if cuda else 0
    done = score_pass(loaded, scorer, items, configs, budget_of(real, ramp))
    # A/B in one job (issue 59 item 7): planning in processes, as `run` plans beside a GPU
    # by default (the dry run: one process, to walk the path); then the host syncs of a
    # shorter pass, counted apart from the timed ones.
    workers = auto_workers(loaded.device) if cuda else 1
    if workers:
        pooled = score_pass(loaded, scorer, items, configs, budget_of(real, ramp),
                            plan_workers=workers)
        moved, outside = flips(done.cells, pooled.cells)
        report.row(f"{name} planned in {workers} process{'es' if workers > 1 else ''}",
                   f"{pooled.tokens_per_s:.0f} tokens/s ({pooled.seconds:.1f} s against "
                   f"{done.seconds:.1f} s planned on the host thread: "
                   f"{done.seconds / pooled.seconds:.2f}x); {len(moved)} flips, "
                   f"{len(outside)} outside bf16 near-ties", "FAIL" if outside else "ok")
        report.figures.setdefault(name, {}).update(
            plan_workers=workers, planned_in_processes_s=round(pooled.seconds, 3),
            planned_on_thread_s=round(done.seconds, 3))
    if cuda:  # host syncs and the GPU-busy share: CUDA's only (the dry run has no rows)
        _syncs_and_busy_share(report, loaded, scorer, items[:32], configs, real, ramp, name)
    rows, length = sizes(loaded.device)["dense"]
    dense = dense_rate(loaded.model, loaded.device, rows, length)
    per_item = done.seconds / len(items) * 26 / len(configs)
    projected = per_item * FULL_GRID[0]
    from fragility_tui.harness.configs import get_config

    fed_back = done.stats.decode_tokens / max(1, len(items) * sum(
        get_config(c).scoring == "generate" for c in configs))
    report.row(f"{name} runner tokens/s", f"{done.tokens_per_s:.0f} ({done.tokens} tokens, "
               f"{len(items)} items x {len(configs)} configs in {done.seconds:.1f} s, "
               f"{done.batches} batches; {fed_back:.2f} tokens fed back per generation "
               f"cell, up to {GENERATION_CAP - 1})")
    report.row(f"{name} dense forward {rows} x {length}", f"{dense:.0f} tokens/s; runner / dense "
               f"{done.tokens_per_s / dense:.2f}")
    report.row(f"{name} projected {FULL_GRID[0]} items x {FULL_GRID[1]} configs",
               f"{projected / 60:.1f} min ({per_item:.3f} s per item" +
               ("" if len(configs) == 26 else f", scaled from {len(configs)} configs") + ")")
    report.figures.setdefault(name, {}).update(
        runner_tokens_per_s=round(done.tokens_per_s), dense_tokens_per_s=round(dense),
        dense_shape=[rows, length], seconds_per_item=round(per_item, 4),
        decode_tokens_per_generation_cell=round(fed_back, 2),
        projected_full_grid_s=round(projected))


def _syncs_and_busy_share(report, loaded, scorer, counted, configs, real, ramp, name) -> None:
    """A short pass counting the synchronising calls torch flags, then the same pass
    profiled for the GPU-busy share: apart from the timed passes (each slows what it
    measures)."""
    counted_pass, syncs = count_syncs(loaded.device, lambda: score_pass(
        loaded, scorer, counted, configs, budget_of(real, ramp)))
    if syncs is not None:
        report.row(f"{name} host syncs", f"{syncs} synchronising calls flagged by torch over "
                   f"{len(counted)} items ({syncs / len(counted):.1f} an item; "
                   f"{counted_pass.stats.decode_calls} decoding steps)")
        report.figures.setdefault(name, {})["host_syncs_per_item"] = round(
            syncs / len(counted), 2)
    _, busy = busy_share(loaded.device, lambda: score_pass(
        loaded, scorer, counted, configs, budget_of(real, ramp)))
    if busy is not None:  # the same short pass, profiled: kernels and copies over its time
        report.row(f"{name} GPU busy", busy if isinstance(busy, str) else
                   f"{busy:.2f} of the wall time of a {len(counted)}-item pass (kernels and "
                   "copies CUPTI recorded; the profiler's cost included)")
        if not isinstance(busy, str):
            report.figures.setdefault(name, {})["gpu_busy_share"] = round(busy, 3)


def peak_memory(report, loaded, scorer, items, configs, real: int, name: str) -> int | None:
    """One full-size batch at the real budget: the GPU memory it takes above the weights
    against the budget's estimate (runners/backends/transformers/memory.py)."""
    import torch

    from runners.backends.transformers.memory import call_bytes_per_token, head_call_bytes

    per_token = call_bytes_per_token(scorer.kv_bytes_per_token, loaded.model.config, 2,
                                     cuda=True, max_new_tokens=GENERATION_CAP)
    estimate = real * per_token + head_call_bytes(loaded.model.config, loaded.device)
    if not loaded.device.startswith("cuda"):
        report.row(f"{name} peak memory", f"n/a on cpu; estimate {estimate / 2**20:.0f} MiB "
                   f"at {real} tokens ({per_token} B a token)", "SKIP")
        return None
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    done = score_pass(loaded, scorer, items, configs, budget_of(real), max_batches=1)
    peak = torch.cuda.max_memory_allocated() - base
    report.row(f"{name} peak memory, full batch", f"{peak / 2**30:.2f} GiB above the weights for "
               f"{done.tokens} tokens; estimate {estimate / 2**30:.2f} GiB at {real} tokens "
               f"({per_token} B a token)", "ok" if peak <= estimate else "WARN")
    report.figures.setdefault(name, {}).update(peak_bytes=peak, estimate_bytes=estimate)
    return peak


def oom_recovery(report, loaded, scorer, items, configs, real: int, name: str,
                 peak: int | None) -> None:
    """A full-size batch at the real budget under a memory cap it cannot fit (on the GPU:
    the memory held now plus 40% of the batch's measured peak; on the CPU: an injected
    out-of-memory), the scorer already built: the budget must halve until a batch fits,
    with the cap still in force."""
    import torch

    from runners.plan.budget import MIN_TOKENS

    cuda = loaded.device.startswith("cuda")
    # On the CPU the real budget follows the memory free at that moment: beside a busy
    # process it can be the minimum, with nothing left to halve. The injected failure tests
    # the halving, so it starts where one can happen.
    start = real if cuda else max(real, 4 * MIN_TOKENS)
    budget, injected = budget_of(start), []

    def inject(number):
        if not cuda and not injected:
            injected.append(number)
            raise torch.OutOfMemoryError("CUDA out of memory (injected by gpu-check on cpu)")

    cap = None
    if cuda:
        torch.cuda.empty_cache()
        total = torch.cuda.mem_get_info()[1]
        cap = torch.cuda.memory_reserved() + int(0.4 * (peak or 0))
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
    try:
        done = score_pass(loaded, scorer, items, configs, budget, on_batch=inject,
                          max_batches=1)
    except RuntimeError as exc:
        done, error = None, str(exc)
    finally:
        if cuda:
            torch.cuda.set_per_process_memory_fraction(1.0)
            torch.cuda.empty_cache()
    label = f"{name} out-of-memory recovery" + ("" if cuda else " (injected)")
    if done is None or not done.batches:
        report.row(label, f"not recovered: {error if done is None else 'no batch ran'}", "FAIL")
        return
    where = f" under a cap of {cap / 2**30:.1f} GiB" if cap else ""
    report.row(label, f"{budget.oom_retries} halvings from {start} tokens, then a batch ran at "
               f"{done.budgets[0]} tokens{where}",
               "ok" if budget.oom_retries else "FAIL")
