"""When a cell's decision sits inside float rounding: the near-tie tolerances per compute
dtype and the margins they are compared with (docs/runner.md, *Margins and near-ties*).

A cell's `margin` is how far its decision was from going the other way:
- generation: the smallest gap, over the greedy steps up to the one that decided the parse
  (the last step taken), between the chosen token's log-probability and the runner-up's
  (fp32 logits: the gap of the logits is the gap of the log-softmax);
- likelihood: the best option's acc_norm score minus the second best's.
The cell is `near_tie` when its margin is at most the tolerance of the run's dtype: a
different batch, padding or kernel could then move the decision by rounding alone, so a
flip there is not evidence of harness fragility.

How the figures are set: fp32's are the reference check's near-tie bound
(tests/runners/test_smollm2.py: batched vs plain loop agree to ~1e-5). bf16's generation
figure is measured: tests/runners/test_bf16_near_ties.py (SmolLM2, 12 real items x 26
configs, batch 1 vs 12 without prefix reuse, 2026-12-02) saw a generation cell's margin move
by at most 0.207 between the two batchings while its output stayed the same, and every one
of the 13 cells whose prediction moved had a margin <= 0.097; the tolerance is twice the
largest move (0.42). bf16's likelihood figure is still reasoned (acc_norm divides an
option's log-likelihood by its length; 0.05 per character): no likelihood cell flipped in
that run, and the largest change of an option's raw log-likelihood, 0.316, bounds the
per-character change only loosely. fp16 keeps 3 more mantissa bits than bf16 (/8).
"""

from __future__ import annotations

import math

NEAR_TIE_TOLERANCE = {
    "fp32": {"generate": 1e-3, "likelihood": 1e-4},
    "bf16": {"generate": 0.42, "likelihood": 0.05},
    "fp16": {"generate": 0.0525, "likelihood": 0.00625},
}
MEASURED = ("fp32: the reference check's near-tie bound; bf16 generation: 2x the largest "
            "margin move between two batchings of SmolLM2 (tests/runners/test_bf16_near_ties.py); "
            "bf16 likelihood: reasoned from the mantissa width; fp16: bf16's / 8 "
            "(runners/plan/numerics.py)")


def tolerance(dtype: str) -> dict:
    """The near-tie tolerances of a compute dtype (fp32's for an unknown one)."""
    return dict(NEAR_TIE_TOLERANCE.get(dtype, NEAR_TIE_TOLERANCE["fp32"]))


def likelihood_margin(normalised: list[float]) -> float:
    """Best minus second best acc_norm score (inf with fewer than two options)."""
    ranked = sorted(normalised, reverse=True)
    return ranked[0] - ranked[1] if len(ranked) > 1 else math.inf


def near_tie(margin: float | None, limit: float) -> bool | None:
    """Whether the margin is inside the tolerance; None when the backend gave no margin."""
    if margin is None or math.isnan(margin):
        return None
    return margin <= limit


def provenance(dtype: str, scorer) -> dict:
    """What a run records about a model's numerics: the head's precision, the near-tie
    tolerances and the start-up tree-mask probe's outcome (runners.backends.transformers.scoring.Scorer.probe)."""
    calls = getattr(scorer, "calls", None)  # None: a backend with its own engine (vLLM)
    return {"head": calls.head_precision if calls else "chosen by the backend",
            "log_softmax": "fp32", "near_tie_tolerance": tolerance(dtype),
            "tolerance_from": MEASURED,
            "mask_probe": dict(getattr(scorer, "probe", None) or {"ran": False})}
