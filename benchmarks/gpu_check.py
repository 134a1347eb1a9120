"""`make gpu-check`: what a first GPU run needs to know, in one table, offline, in minutes.

On one GPU (`--device cuda`, the default of `make gpu-check`), with the offline SmolLM2 wheel
and no network, it prints:
- versions: torch, CUDA, cuDNN, transformers, vLLM; which SDPA kernels are enabled;
- the scorer's start-up probe: its largest log-likelihood difference from plain forwards
  in each dtype, and the prefill layout it chose;
- N real items x 26 configs (8 on a GPU) scored batched in fp32 and bf16 and by the plain
  loop (runners.backends.transformers.plain_loop, fp32): prediction flips, near-ties (when the cells carry
  `near_tie`), the largest log-likelihood gap;
- bf16 with the items shuffled and three token budgets: flips against the first bf16 pass,
  and those outside near-ties;
- the first batch's peak memory against the budget's estimate (runners.backends.transformers.memory), and an
  out-of-memory forced with torch.cuda.set_per_process_memory_fraction, recovered by halving;
- optimum-quanto int8 / int4 builds: flips against fp32, tokens/s;
- vLLM when installed: prompt_logprobs per prompt token, the same scores with the requests
  reversed and with prefix caching off and on; tokens/s of both backends.

`--device cpu` (`make gpu-check DEVICE=cpu`) is the dry run: the same code on 1 item and 4
configs, the out-of-memory injected instead of forced, vLLM skipped; it must pass in 5
minutes on a 2-core CPU. Exit status 1 when a check fails (a FAIL row): fp32 batched vs the plain loop
outside near-ties, bf16 flips between batchings outside near-ties (where near_tie exists),
out-of-memory not recovered.

usage: python benchmarks/gpu_check.py [--device cuda|cpu] [--items N] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared" / "benchmarks"
MODEL = "smollm2-135m-instruct"
BENCHMARK_FILES = ("arc_challenge_test", "hellaswag_val", "mmlu_test", "truthfulqa_mc1")
FP32_NEAR_TIE = 1e-4  # fp32 vs the plain loop: a different prediction this close is a tie
BUDGETS = (512, 4096, 32768)  # tokens: one call per node, a few items, the whole set at once
PROBE = [[1, 2, 3, 4, 5], [1, 2, 6, 7], [1, 8, 9], [1, 2, 3, 10, 11]]  # as Scorer's probe

ROWS: list[tuple[str, str, str]] = []  # (check, value, verdict)
FAILED: list[str] = []


def row(check: str, value, verdict: str = "") -> None:
    ROWS.append((check, str(value), verdict))
    if verdict == "FAIL":
        FAILED.append(check)
    print(f"  {check}: {value} {verdict}".rstrip(), flush=True)


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def load_items(count: int):
    """`count` real items (round robin over the four benchmarks), from ../shared when it is
    there, else from the project's own starter items."""
    from fragility_tui.items.loaders import load_items as load

    per = max(1, -(-count // 4))
    if SHARED.is_dir():
        groups = [load(SHARED / f"{name}.jsonl", per_benchmark=per, seed=0)[0]
                  for name in BENCHMARK_FILES]
        items = [it for group in zip(*groups) for it in group]
        source = "../shared/benchmarks"
    else:
        items, _ = load(REPO / "sample_grids" / "starter_items.jsonl", per_benchmark=per, seed=0)
        source = "sample_grids/starter_items.jsonl"
    return items[:count], source


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


CONFIGS: list[str] = []  # all 26 on a GPU; a few in the CPU dry run (main)


def score_cells(loaded, model, items, *, order=None, max_slots=16384, batch_items=4):
    """{(item, config): CellRow} from the batched scorer, and (tokens forwarded, seconds)."""
    from runners.plan.item_requests import Encoder, cells_for, plan_item
    from runners.backends.transformers.scoring import Scorer

    scorer = Scorer(model, loaded.tokenizer, loaded.eos_ids)
    encoder = Encoder(loaded.tokenizer, loaded.is_instruct, loaded.template_args)
    items = [items[i] for i in order] if order else list(items)
    cells, tokens = {}, 0
    sync(loaded.device)
    started = time.perf_counter()
    for start in range(0, len(items), batch_items):
        gen, lik = [], []
        plans = [plan_item(encoder, it, CONFIGS, 0, gen, lik)
                 for it in items[start:start + batch_items]]
        result = scorer.score(gen, lik, max_slots=max_slots)
        tokens += result.stats.forwarded
        for plan in plans:
            for cell in cells_for(plan, result, "m", None, 0.0):
                cells[(cell.item_uid, cell.config_id)] = cell
    sync(loaded.device)
    return cells, scorer, (tokens, time.perf_counter() - started)


def near(cell) -> bool:
    return bool(getattr(cell, "near_tie", False))  # another branch adds it; absent: False


def compare(a: dict, b: dict):
    """(flips, flips where neither cell is a near-tie, largest log-likelihood gap)."""
    flips = [k for k in a if a[k].pred != b[k].pred]
    outside = [k for k in flips if not (near(a[k]) or near(b[k]))]
    gap = max((abs(x - y) for k in a if a[k].scores and b[k].scores
               for x, y in zip(a[k].scores, b[k].scores)), default=0.0)
    return flips, outside, gap


def has_near_tie(cells: dict) -> bool:
    return any(hasattr(c, "near_tie") for c in cells.values())


def probe_gap(loaded, model) -> float:
    """The largest |batched - plain| log-likelihood on the scorer's start-up probe."""
    import torch

    from runners.backends.transformers.scoring import LikelihoodRequest, Scorer

    scorer = Scorer(model, loaded.tokenizer, loaded.eos_ids)
    vocab = model.config.vocab_size
    requests = [LikelihoodRequest(i, [t % vocab for t in seq], 1) for i, seq in enumerate(PROBE)]
    got = scorer.score([], requests).loglikelihoods
    gap = 0.0
    with torch.no_grad():
        for request in requests:
            ids = torch.tensor([request.tokens], device=loaded.device)
            logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
            expected = float(logprobs[torch.arange(len(request.tokens) - 1), ids[0, 1:]].sum())
            gap = max(gap, abs(got[request.key][0] - expected))
    return gap


# -- sections -----------------------------------------------------------------------------

def versions(device: str) -> None:
    import torch

    from runners.backends.vllm import installed_version

    cuda = device.startswith("cuda")
    row("torch", torch.__version__)
    row("CUDA", torch.version.cuda if cuda else f"{torch.version.cuda} (not used: cpu)")
    row("cuDNN", torch.backends.cudnn.version() if cuda else "n/a (cpu)")
    row("transformers", version("transformers"))
    row("vLLM", installed_version() or "not installed")
    row("optimum-quanto", version("optimum-quanto"))
    if cuda:
        row("GPU", f"{torch.cuda.get_device_name()} (capability "
                   f"{'.'.join(map(str, torch.cuda.get_device_capability()))})")
        kernels = {"flash": torch.backends.cuda.flash_sdp_enabled(),
                   "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                   "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                   "math": torch.backends.cuda.math_sdp_enabled()}
        row("SDPA kernels enabled", ", ".join(k for k, on in kernels.items() if on))
    else:
        row("SDPA kernels enabled", "cpu (flash / math CPU kernels; GQA read in place)")
    row("allocator", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"))


def grid_section(loaded, fp32, bf16, items, plain: bool):
    from runners.backends.transformers.plain_loop import reference_cell

    fp32_cells, scorer32, rate32 = score_cells(loaded, fp32, items)
    bf16_cells, scorer16, rate16 = score_cells(loaded, bf16, items)
    row("probe gap fp32 / bf16", f"{probe_gap(loaded, fp32):.2e} / {probe_gap(loaded, bf16):.2e}")
    row("layout fp32", scorer32.layout)
    row("layout bf16", scorer16.layout, "" if scorer16.packing == scorer32.packing else
        "WARN (bf16 probe fell back)")
    flips, outside, gap = compare(fp32_cells, bf16_cells)
    tie_note = "" if has_near_tie(bf16_cells) else " (cells carry no near_tie yet)"
    row(f"bf16 vs fp32, {len(items)} items x {len(CONFIGS)} configs",
        f"{len(flips)} flips, {len(flips) - len(outside)} near-ties{tie_note}, "
        f"largest log-likelihood gap {gap:.3g}")
    if plain:
        worst, bad, ties = 0.0, [], 0
        for item in items:
            for config_id in {k[1] for k in fp32_cells}:
                ref = reference_cell(fp32, loaded.tokenizer, item, config_id, 0,
                                     chat=loaded.is_instruct, template_args=loaded.template_args)
                cell = fp32_cells[(item.item_uid, config_id)]
                if ref.scores and cell.scores:
                    worst = max(worst, max(abs(a - b) for a, b in zip(ref.scores, cell.scores)))
                if cell.pred != ref.pred:
                    ties += ref.margin < FP32_NEAR_TIE
                    if ref.margin >= FP32_NEAR_TIE:
                        bad.append(f"{item.item_uid} {config_id}")
        row("fp32 batched vs plain loop", f"{len(bad)} flips outside near-ties, {ties} near-tie "
            f"flips, largest log-likelihood gap {worst:.3g}", "FAIL" if bad else "ok")
    return fp32_cells, bf16_cells, rate32, rate16


def batching_section(loaded, bf16, items, bf16_cells) -> None:
    order = list(range(len(items)))
    random.Random(0).shuffle(order)
    known = has_near_tie(bf16_cells)
    for budget in BUDGETS:
        cells, _, _ = score_cells(loaded, bf16, items, order=order, max_slots=budget,
                                  batch_items=len(items) if budget == BUDGETS[-1] else 2)
        flips, outside, _ = compare(bf16_cells, cells)
        verdict = ("FAIL" if outside else "ok") if known else ""
        row(f"bf16 shuffled, budget {budget}",
            f"{len(flips)} flips, {len(outside)} outside near-ties"
            + ("" if known else " (no near_tie field: not judged)"), verdict)


def memory_section(loaded, model, items) -> None:
    import torch

    from runners.backends.transformers.memory import call_bytes_per_token, initial_budget
    from runners.plan.budget import TokenBudget, attempt
    from runners.backends.transformers.scoring import Scorer

    cuda = loaded.device.startswith("cuda")
    kv = Scorer(model, loaded.tokenizer, loaded.eos_ids).kv_bytes_per_token
    budget = initial_budget(kv, loaded.device, model.config, 2)
    per_token = call_bytes_per_token(kv, model.config, 2, cuda=cuda)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        score_cells(loaded, model, items, max_slots=budget.tokens, batch_items=len(items))
        peak = torch.cuda.max_memory_allocated() - base
        row("first batch peak (bf16)", f"{peak / 2**20:.0f} MiB above the weights; budget "
            f"{budget.tokens} tokens x {per_token} B = {budget.tokens * per_token / 2**20:.0f} MiB")
    else:
        row("first batch peak", f"n/a on cpu; budget {budget.tokens} tokens x {per_token} B/token")
    # Out-of-memory: forced on a GPU (a memory fraction the batch cannot fit), injected here.
    small = TokenBudget(16384, "gpu-check", item_cap=len(items))
    failures = []

    def batch(limit):
        if not cuda and not failures:
            failures.append(1)
            raise torch.OutOfMemoryError("CUDA out of memory (injected by gpu-check on cpu)")
        return score_cells(loaded, model, items[:limit], max_slots=small.tokens,
                           batch_items=limit)

    if cuda:  # room for 64 MiB beyond what the weights already hold: the batch cannot fit
        torch.cuda.empty_cache()
        total = torch.cuda.mem_get_info()[1]
        held = torch.cuda.memory_reserved()
        torch.cuda.set_per_process_memory_fraction(min(1.0, (held + (64 << 20)) / total))
    try:
        recovered, tries = False, 0
        while tries < 12:
            tries += 1
            _, oom = attempt(batch, small.item_limit or len(items))
            if not oom:
                recovered = True
                break
            failures.append(1)
            if not small.shrink(small.item_limit or len(items)):
                break
            if cuda and tries == 3:  # let the halved budget fit again
                torch.cuda.set_per_process_memory_fraction(1.0)
    finally:
        if cuda:
            torch.cuda.set_per_process_memory_fraction(1.0)
    row("out-of-memory recovery" + ("" if cuda else " (injected)"),
        f"{small.oom_retries} halvings, then ran at {small.tokens} tokens" if recovered
        else f"not recovered after {tries} tries", "ok" if recovered and small.oom_retries
        else "FAIL")


def quanto_section(items, device: str, fp32_cells) -> None:
    from runners.models.prepare import load_spec as load_model

    for scheme in ("int8", "int4"):
        try:
            loaded = load_model(MODEL, dtype="fp32", device=device, quantize=scheme)
        except Exception as exc:  # a quanto kernel missing on this build: say which
            row(f"quanto {scheme}", f"failed to load: {exc}", "WARN")
            continue
        cells, _, (tokens, seconds) = score_cells(loaded, loaded.model, items)
        flips, _, gap = compare(fp32_cells, cells)
        row(f"quanto {scheme}", f"{len(flips)} flips vs fp32, largest gap {gap:.3g}, "
            f"{tokens / seconds:.0f} tokens/s")


def vllm_section(items, device: str) -> None:
    from runners.backends.vllm import installed_version

    if installed_version() is None or not device.startswith("cuda"):
        row("vLLM", "skipped (" + ("not installed" if installed_version() is None
                                   else "needs a CUDA device") + ")")
        return
    try:
        _vllm_checks(items)
    except Exception as exc:  # report, do not hide the rest of the table
        row("vLLM", f"error: {type(exc).__name__}: {exc}", "WARN")


def _vllm_checks(items) -> None:
    from runners.plan.item_requests import Encoder, plan_item
    from runners.run.loop import RunSpec
    from runners.models.prepare import prepare_model
    from runners.backends.vllm import load_vllm

    results = {}
    for caching in (True, False):
        spec = RunSpec(models=[MODEL], items=[], grid="gpu-check", dtype="bf16", device="cuda",
                       backend="vllm", prefix_reuse=caching)
        prepared = prepare_model(MODEL, dtype="bf16", device="cuda", backend="vllm",
                                 engine_attention="chosen by vllm")
        loaded, scorer = load_vllm(prepared, spec)
        encoder = Encoder(loaded.tokenizer, loaded.is_instruct, loaded.template_args)
        gen, lik = [], []
        for it in items:
            plan_item(encoder, it, CONFIGS, 0, gen, lik)
        started = time.perf_counter()
        forward = scorer.score(gen, lik)
        seconds = time.perf_counter() - started
        backward = scorer.score(gen[::-1], lik[::-1])
        gap = max(abs(forward.loglikelihoods[k][0] - backward.loglikelihoods[k][0])
                  for k in forward.loglikelihoods)
        results[caching] = forward
        row(f"vLLM prefix caching {'on' if caching else 'off'}",
            f"{len(lik)} likelihood requests, reversed order gap {gap:.3g}, "
            f"{forward.stats.forwarded / seconds:.0f} tokens/s")
        del scorer, loaded
    on, off = results[True], results[False]
    gap = max(abs(on.loglikelihoods[k][0] - off.loglikelihoods[k][0]) for k in on.loglikelihoods)
    same = sum(on.generations[k].text == off.generations[k].text for k in on.generations)
    row("vLLM caching on vs off", f"log-likelihood gap {gap:.3g}, {same}/{len(on.generations)} "
        "generations equal")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the check) or cpu (dry run)")
    parser.add_argument("--items", type=int, default=None, help="real items (8 on cuda, 1 on cpu)")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain-loop comparison")
    parser.add_argument("--json", metavar="PATH", help="also write the table as JSON")
    args = parser.parse_args(argv)
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    from runners.backends.base import configure_allocator

    configure_allocator()  # as a run does, before CUDA is first used
    import torch

    from runners.models.prepare import load_spec as load_model

    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-check: no CUDA device here; `make gpu-check DEVICE=cpu` is the dry run")
        return 2
    torch.manual_seed(0)
    if device == "cpu":
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    from fragility_tui.harness.configs import CONFIG_IDS

    count = args.items or (8 if device.startswith("cuda") else 1)
    # The dry run is about the code paths, not the figures: one item, four configs (two
    # generation, two cloze) keep it within 5 minutes on a busy 2-core CPU.
    CONFIGS[:] = list(CONFIG_IDS) if device.startswith("cuda") else (
        list(CONFIG_IDS[:2]) + [c for c in CONFIG_IDS if c.startswith("cloze")][:2])
    started = time.perf_counter()
    print(f"gpu-check on {device}, {MODEL}", flush=True)
    versions(device)
    items, source = load_items(count)
    row("items", f"{len(items)} from {source}")
    loaded = load_model(MODEL, dtype="fp32", device=device)
    fp32 = loaded.model
    # The same checkpoint loaded again in bf16: its weights rounded once. (Not a deep copy of
    # the fp32 model: on a CPU its linears are oneDNN-packed, and a packed weight can be
    # neither copied nor cast.)
    bf16 = load_model(MODEL, dtype="bf16", device=device).model
    fp32_cells, bf16_cells, rate32, rate16 = grid_section(loaded, fp32, bf16, items,
                                                          plain=not args.no_plain)
    row("transformers tokens/s fp32 / bf16",
        f"{rate32[0] / rate32[1]:.0f} / {rate16[0] / rate16[1]:.0f}")
    batching_section(loaded, bf16, items, bf16_cells)
    memory_section(loaded, bf16, items)
    del bf16
    quanto_section(items, device, fp32_cells)
    vllm_section(items, device)
    row("wall time", f"{time.perf_counter() - started:.0f} s")
    width = max(len(check) for check, _, _ in ROWS)
    print("\n| check | value | verdict |\n|---|---|---|")
    for check, value, verdict in ROWS:
        print(f"| {check:<{width}} | {value} | {verdict} |")
    if args.json:
        Path(args.json).write_text(json.dumps([dict(zip(("check", "value", "verdict"), r))
                                               for r in ROWS], indent=1))
    if FAILED:
        print(f"\ngpu-check FAILED: {', '.join(FAILED)}")
        return 1
    print("\ngpu-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
