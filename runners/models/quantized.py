"""Quantised weights at float speed on a CPU.

optimum-quanto has no CPU integer kernel for float activations: each call of a frozen
QLinear de-quantises its weights (int8: `scale * data`; int4: `(data - shift) * scale` per
group) and then runs `matmul(x, w.t())`. Doing that de-quantisation once, at load, gives the
same numbers bit for bit (tests/runners/test_quantized.py) without paying for it on every
forward (2.1x on SmolLM2-135M int4: benchmarks/bench_quantized.py). The grid still records
the quanto scheme: what is measured is the effect of quantising the weights, unchanged.
"""

from __future__ import annotations

import torch


class DequantizedLinear(torch.nn.Module):
    """A frozen quanto QLinear with its weights de-quantised in advance."""

    def __init__(self, qlinear):
        super().__init__()
        self.in_features, self.out_features = qlinear.in_features, qlinear.out_features
        with torch.no_grad():
            self.register_buffer("weight", qlinear.qweight.dequantize().contiguous())
        self.bias = qlinear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.matmul(x, self.weight.t())  # quanto's own op: not F.linear, same bits
        return out if self.bias is None else out + self.bias


def dequantize_once(model: torch.nn.Module) -> int:
    """Replace every frozen quanto QLinear of `model` by a DequantizedLinear; returns how many."""
    from optimum.quanto.nn import QLinear

    targets = [(name, module) for name, module in model.named_modules()
               if isinstance(module, QLinear)]
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, DequantizedLinear(module))
    return len(targets)
