"""The GPU check's optional sections: optimum-quanto builds and vLLM, each reported as SKIP
with the reason where its wheel is missing or it cannot run here, never ending the check.

vLLM runs in a child process per engine (benchmarks/gpu_check_vllm.py): vLLM 0.30 refuses to
start when the GPU's free memory is below the share it is given, and this process still
holds the transformers models' memory (CUDA's caching allocator keeps it); a second engine
in one process is not reliably freed either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_check_sections import family_cases, sizes

HERE = Path(__file__).resolve().parent


def quanto(report, device: str, items: list, configs: list, work: Path) -> None:
    """int8 and int4 builds of the tiny llama against its unquantised build: flips, the
    largest log-likelihood gap. Each scheme in its own try: a build that fails (a kernel
    missing on this GPU) is a SKIP row with the reason, and the next rows still run."""
    import importlib.util

    if importlib.util.find_spec("optimum") is None or \
            importlib.util.find_spec("optimum.quanto") is None:
        report.row("quanto int8 / int4", "optimum-quanto not installed", "SKIP")
        return
    from runners.models.prepare import load_spec

    cases, tiny = family_cases()
    folder = cases.tiny_folder(work, "llama", tiny.make_tokenizer())
    chosen = items[:sizes(device)["quanto_items"]]
    dtype = "bf16" if device.startswith("cuda") else "fp32"
    base = cases.batched_cells(load_spec(str(folder), dtype=dtype, device=device), chosen,
                               configs)
    for scheme in ("int8", "int4"):
        try:
            loaded = load_spec(str(folder), dtype=dtype, device=device, quantize=scheme)
            cells = cases.batched_cells(loaded, chosen, configs)
        except Exception as exc:  # a quanto kernel missing on this build: say which
            report.row(f"quanto {scheme}", f"could not build or score: {type(exc).__name__}: "
                       f"{str(exc)[:200]}", "SKIP")
            continue
        moved = sum(a.pred != b.pred for a, b in zip(base, cells))
        gap = max((abs(x - y) for a, b in zip(base, cells) if a.scores and b.scores
                   for x, y in zip(a.scores, b.scores)), default=0.0)
        report.row(f"quanto {scheme} ({dtype})", f"{moved} of {len(cells)} predictions differ "
                   f"from the unquantised build, largest log-likelihood gap {gap:.3g}")


def vllm(report, device: str, items: list, configs: list, work: Path, folder_of) -> None:
    """Prefix caching on and off, each engine in a fresh child process: likelihood gaps
    with the requests reversed, between caching on and off, and tokens/s."""
    from runners.backends.vllm import installed_version

    if installed_version() is None:
        report.row("vLLM", "not installed (its wheel does not fit the box's 64 MiB)", "SKIP")
        return
    if not device.startswith("cuda"):
        report.row("vLLM", "needs a CUDA device", "SKIP")
        return
    folder = folder_of(work)
    results = {}
    for caching in ("on", "off"):
        out = work / f"vllm-{caching}.json"
        done = subprocess.run(
            [sys.executable, str(HERE / "gpu_check_vllm.py"), "--folder", str(folder),
             "--caching", caching, "--items", str(len(items)), "--configs", ",".join(configs),
             "--out", str(out)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not out.exists():
            report.row(f"vLLM prefix caching {caching}", "engine failed: "
                       + (done.stderr or done.stdout)[-300:].replace("\n", " "), "FAIL")
            return
        results[caching] = json.loads(out.read_text())
        got = results[caching]
        report.row(f"vLLM prefix caching {caching}",
                   f"{got['likelihood_requests']} likelihood requests, reversed order gap "
                   f"{got['reversed_gap']:.3g}, {got['tokens_per_s']:.0f} tokens/s; "
                   f"batch invariance: {got['batch_invariant']}")
    on, off = results["on"], results["off"]
    gap = max((abs(on["loglikelihoods"][k] - off["loglikelihoods"][k])
               for k in on["loglikelihoods"]), default=0.0)
    same = sum(on["generations"][k] == off["generations"][k] for k in on["generations"])
    report.row("vLLM caching on vs off", f"log-likelihood gap {gap:.3g}, "
               f"{same}/{len(on['generations'])} generations equal")
