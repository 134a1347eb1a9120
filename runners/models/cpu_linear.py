"""fp32 linear layers on a CPU through oneDNN, on weights packed once for it.

torch runs an fp32 `nn.Linear` on a CPU through MKL's sgemm. On this project's 2-core AMD
EPYC (AVX-512) oneDNN's fp32 matrix product, on a weight reordered once into its blocked
layout (the op pair torch's own compiler uses: `mkldnn._reorder_linear_weight`,
`mkldnn._linear_pointwise`), ran SmolLM2's projections 2.3-2.6x faster, with fp32
rounding (docs/runner.md, "Linear layers on a CPU"). Which is faster depends on the CPU and
the libraries, so it is measured where the run is: one projection of the model's own
shape, both ways, at the run's thread count, before any module is swapped. The packed path is kept only when it
agrees with sgemm to fp32 rounding and is faster; otherwise nothing changes
(`FRAGILITY_CPU_LINEAR=default` keeps torch's kernel whatever the measurement).

Only exact `nn.Linear` modules with fp32 weights on a CPU are swapped (not quantised
modules, not half dtypes, which torch already sends to oneDNN). A tied head keeps the
embedding's dense weight and holds a packed copy beside it.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import torch

from fragility_tui.settings import cpu_linear_kernel

PROBE_ROWS = 256  # tokens of the timing probe: about one prefill row
PROBE_REPEATS = 3
MIN_SPEEDUP = 1.1  # below this the swap is not worth the packed copies
AGREEMENT_RTOL = 1e-4  # of the output's largest magnitude: sgemm and oneDNN both round in fp32
SWITCH = "FRAGILITY_CPU_LINEAR"  # fragility_tui.settings reads it; "default" keeps torch's kernel
# oneDNN caches up to 1,024 primitives by default, one per (input rows, weight shape), and the
# runner's calls come in hundreds of row counts: on the 40-item grid the cache held ~130 MB
# at the run's peak. Sixteen keep one forward's five projection shapes warm; fewer made no
# difference to speed (docs/runner.md, "Measured"). oneDNN reads the variable once, when it
# makes its first primitive (the timing probe below, at the latest): the transformers backend
# sets it before it loads a model (runners.backends.transformers.configure_device); a value
# the user set stays.
PRIMITIVE_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
PRIMITIVE_CACHE_CAPACITY = 16


class PackedLinear(torch.nn.Module):
    """An fp32 `nn.Linear` computed by oneDNN on a prepacked weight."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)
        self.bias = linear.bias

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(hidden, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, oneDNN packed"


def _plain_linears(model: torch.nn.Module) -> list[tuple[torch.nn.Module, str]]:
    """(parent, attribute) of each module to swap; not the modules themselves, so that each
    dense weight is freed as soon as its packed copy replaces it."""
    return [(parent, name) for parent in model.modules()
            for name, child in parent.named_children()
            if type(child) is torch.nn.Linear and child.weight.dtype == torch.float32
            and child.weight.device.type == "cpu"]


def _seconds(call, hidden: torch.Tensor) -> float:
    call(hidden)  # the first call sets the kernel up
    best = float("inf")
    for _ in range(PROBE_REPEATS):
        started = time.perf_counter()
        call(hidden)
        best = min(best, time.perf_counter() - started)
    return best


@torch.no_grad()
def measure(linear: torch.nn.Linear) -> dict:
    """sgemm against oneDNN on one projection: seconds of each, their agreement, and the
    packed module (the swap reuses it rather than reordering the weight again)."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(PROBE_ROWS, linear.in_features, generator=generator)
    packed = PackedLinear(linear)
    dense_out, packed_out = linear(hidden), packed(hidden)
    scale = float(dense_out.abs().max()) or 1.0
    return {"dense_s": _seconds(linear, hidden), "packed_s": _seconds(packed, hidden),
            "largest_difference": float((dense_out - packed_out).abs().max()) / scale,
            "packed": packed}


def pack_linears(model: torch.nn.Module) -> dict:
    """Swap the model's fp32 CPU linears for PackedLinear where that is measured faster
    and agrees; what was decided, for provenance."""
    if cpu_linear_kernel() == "default":
        return {"kernel": "torch default", "reason": f"{SWITCH}=default"}
    linears = _plain_linears(model)
    if not linears:
        return {"kernel": "torch default", "reason": "no fp32 nn.Linear on the CPU"}
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise") or not torch.backends.mkldnn.is_available():
        return {"kernel": "torch default", "reason": "this torch has no oneDNN linear"}
    # the weight shape most of the arithmetic goes to: a decoder projection repeated in
    # every layer, not the one (larger) head
    weight_by_shape = Counter()
    for parent, name in linears:
        weight = getattr(parent, name).weight
        weight_by_shape[tuple(weight.shape)] += weight.numel()
    (out_features, in_features), _ = weight_by_shape.most_common(1)[0]
    probed = next(getattr(parent, name) for parent, name in linears
                  if tuple(getattr(parent, name).weight.shape) == (out_features, in_features))
    cache = os.environ.get(PRIMITIVE_CACHE, "oneDNN's default")
    try:
        probe = measure(probed)
    except (RuntimeError, TypeError) as exc:  # a oneDNN build that refuses this shape, or an op
        # whose signature moved
        return {"kernel": "torch default", "reason": f"oneDNN probe failed: {exc}"}
    speedup = probe["dense_s"] / probe["packed_s"]
    record = {"probe_shape": [PROBE_ROWS, in_features, out_features],
              "speedup": round(speedup, 2),
              "largest_difference": float(f"{probe['largest_difference']:.2e}"),
              "primitive_cache_capacity": cache}
    if probe["largest_difference"] > AGREEMENT_RTOL:
        return {"kernel": "torch default", "reason": "oneDNN disagreed with sgemm", **record}
    if speedup < MIN_SPEEDUP:
        return {"kernel": "torch default", "reason": "oneDNN not faster here", **record}
    for parent, name in linears:
        linear = getattr(parent, name)
        setattr(parent, name, probe["packed"] if linear is probed else PackedLinear(linear))
    del linear, probed, probe
    # The checkpoint is memory-mapped; while any tensor (an embedding, a norm) still lives
    # in the mapping, all its pages stay resident beside the packed copies (+0.5 GB for
    # SmolLM2). Copied out, the mapping goes with the last dense weight.
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.device.type == "cpu":
                parameter.data = parameter.data.clone()
    return {"kernel": "oneDNN, prepacked fp32 weights", "modules": len(linears), **record}
