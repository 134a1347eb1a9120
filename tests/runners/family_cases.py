"""The model families of tests/runners/test_families.py and their comparison with the plain
loop, importable by the GPU check too (benchmarks/gpu_check.py runs the same cases on CUDA
in bf16): tiny random models (2 layers, hidden 64, the trained byte-level BPE of
tiny_models.py, a large initialiser so decisions are far from ties) saved as folders and
loaded the way `run --model FOLDER` loads them.

The judge is the dtype's: a cell may differ from the plain loop's only inside the near-tie
tolerance of the compute dtype (runners/plan/numerics.py: 1e-3 / 1e-4 in fp32, 0.42 /
0.05 in bf16), flagged by the batched cell's `near_tie` or the plain loop's margin."""

from __future__ import annotations

import os

from fragility_tui.items.item import Item

ITEMS = [
    Item("toy/1", "toy", None, "Which gas do plants absorb from the air?",
         ("oxygen", "nitrogen", "carbon dioxide", "helium"), 2),
    Item("toy/2", "toy", "geo", "What is the capital of France?",
         ("Paris", "Rome", "Berlin", "Madrid"), 0),
]
SEED = 0
MOE = {"num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
       "moe_intermediate_size": 32}
# model_type -> (extra config, the attention implementation it must run with on current
# transformers; expected_attention adjusts it for the installed release)
FAMILIES = {
    "llama": ({}, "sdpa"),
    "qwen3": ({}, "sdpa"),
    "qwen3_moe": (MOE, "sdpa"),
    "mixtral": (MOE, "sdpa"),
    "gemma2": ({"sliding_window": 24}, "eager"),
    "gemma3_text": ({"sliding_window": 24}, "sdpa"),
    "gpt_oss": ({**MOE, "sliding_window": 24}, "eager"),
    "phi3": ({}, "sdpa"),
    "olmo2": ({}, "sdpa"),
    # Gemma 4's full-attention layers default to head_dim 512 and its per-layer input
    # embeddings to 256 columns a layer (their rows: the tokenizer's vocabulary, tiny_folder)
    "gemma4_text": ({"sliding_window": 24, "global_head_dim": 32,
                     "hidden_size_per_layer_input": 16}, "sdpa"),
}


def expected_attention(model_type: str) -> str:
    """The attention FAMILIES names, except where the installed transformers' class of an
    `eager` family does support sdpa: transformers 5.17's Gemma 2 does (5.25's does not), and
    the runner then keeps sdpa (runners/models/load.attention_implementation)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    listed = FAMILIES[model_type][1]
    model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(AutoConfig.for_model(model_type))]
    return "sdpa" if listed == "eager" and getattr(model_class, "_supports_sdpa", False) else listed


def device_and_dtype() -> tuple[str, str]:
    """(device, dtype) the family tests run on: FRAGILITY_TEST_DEVICE (default cpu) and
    FRAGILITY_TEST_DTYPE (default fp32). `FRAGILITY_TEST_DEVICE=cuda
    FRAGILITY_TEST_DTYPE=bf16 pytest tests/runners/test_families.py` is the GPU check's core
    (benchmarks/gpu_check.py calls compare_with_plain_loop itself)."""
    return (os.environ.get("FRAGILITY_TEST_DEVICE", "cpu"),
            os.environ.get("FRAGILITY_TEST_DTYPE", "fp32"))


def tiny_folder(root, model_type: str, tokenizer):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    extra = FAMILIES[model_type][0]
    config = AutoConfig.for_model(
        model_type, vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=1024, initializer_range=0.5,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, **extra)
    if hasattr(config, "vocab_size_per_layer_input"):
        # Gemma 4's per-layer input embeddings default to 262,144 rows: 134M of a 135M-
        # parameter "tiny" model, ~8 CPU-s a test to initialise, save and load
        config.vocab_size_per_layer_input = len(tokenizer)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    folder = root / f"tiny-{model_type}-instruct"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def batched_cells(loaded, items=ITEMS, configs=None) -> list:
    """The batched scorer's cells (CellRow, near_tie by the dtype's tolerance)."""
    from fragility_tui.harness.configs import CONFIG_IDS
    from runners.backends.transformers.scoring import Scorer
    from runners.plan.item_requests import Encoder, cells_for, plan_item
    from runners.plan.numerics import tolerance

    scorer = Scorer(loaded.model, loaded.tokenizer, loaded.eos_ids)
    encoder = Encoder(loaded.tokenizer, loaded.is_instruct, loaded.template_args)
    gen, lik = [], []
    plans = [plan_item(encoder, item, list(configs or CONFIG_IDS), SEED, gen, lik)
             for item in items]
    result = scorer.score(gen, lik)
    return [row for plan in plans
            for row in cells_for(plan, result, "tiny", None, 0.0, tolerance(loaded.dtype))]


def compare_with_plain_loop(loaded, items=ITEMS, configs=None) -> dict:
    """Each batched cell beside runners/backends/transformers/plain_loop.py's: flips (the
    prediction differs), those outside the dtype's near-ties (a failure), the largest
    log-likelihood gap, generations whose text is not a prefix of generate's, and the
    (cell, plain) pairs for the fp32 test's stricter checks."""
    from runners.backends.transformers.plain_loop import reference_cell
    from runners.plan.numerics import tolerance

    limits = tolerance(loaded.dtype)
    by_item = {item.item_uid: item for item in items}
    pairs, flips, outside, texts, gap = [], [], [], [], 0.0
    for row in batched_cells(loaded, items, configs):
        reference = reference_cell(loaded.model, loaded.tokenizer, by_item[row.item_uid],
                                   row.config_id, SEED, chat=loaded.is_instruct,
                                   template_args=loaded.template_args)
        pairs.append((row, reference))
        where = (row.item_uid, row.config_id)
        limit = limits["likelihood" if reference.scores is not None else "generate"]
        if reference.scores is not None:
            gap = max(gap, max(abs(a - b) for a, b in zip(row.scores, reference.scores)))
        elif not reference.output.startswith(row.raw_output):
            texts.append(where)
        if row.pred != reference.pred:
            flips.append(where)
            if not (row.near_tie or reference.margin <= limit):
                outside.append((*where, row.margin, reference.margin))
    return {"cells": len(pairs), "flips": flips, "outside": outside, "texts_differ": texts,
            "largest_gap": gap, "near_ties": sum(bool(row.near_tie) for row, _ in pairs),
            "pairs": pairs}
