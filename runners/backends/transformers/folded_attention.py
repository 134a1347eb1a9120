"""SDPA with grouped KV heads folded into the query for the scorer's short masked calls.

A decoding step of the scorer carries a few queries per row (one per going leaf, up to
runners.backends.transformers.decoding.DECODE_GROUP_LEAVES) under a custom 4D mask. For a model whose query heads
share KV heads (grouped-query attention), transformers' `sdpa` either copies every KV head
once per query head (`repeat_kv`: CUDA under a mask) or lets the CPU kernel pair each query
head with its KV head (`enable_gqa`). Both attend with a handful of queries per head, a
matrix-vector shape. Folding the heads of a group into that group's query rows (heads x
queries -> [KV heads, group x queries]) gives one matrix product per KV head and reads each
key once, with the same mask repeated per head. Exact: the same products, summed the same
way (tests/runners/test_folded_attention.py compares it with transformers' `sdpa`).

Measured on this CPU (2 threads, SmolLM2-135M's 9 query / 3 KV heads, fp32): 14 rows x 4
queries over 650 keys, 1.42 -> 0.92 ms per layer; one query per row was slower folded
(0.46 -> 0.57 ms) and prefill shapes (256 queries) unchanged, so only 2 to FOLD_MAX_QUERIES
queries fold; a 12-item grid run's decoding spent 25-30% less time in attention. On CUDA it
replaces `repeat_kv`'s copies; not measured there yet (no GPU in these sessions).

Installed by runners.backends.transformers.scoring.Scorer in transformers' attention registry under `sdpa` itself
(the registry is made for such overrides), so every path that checks the implementation's
name is unchanged and provenance still says `sdpa`; any call it does not fold goes to
transformers' own function untouched."""

from __future__ import annotations

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

FOLD_MAX_QUERIES = 16  # decoding shapes; longer calls (prefill) gain nothing on a CPU


def folded_sdpa(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                attention_mask: torch.Tensor | None, dropout: float = 0.0,
                scaling: float | None = None, is_causal: bool | None = None, **kwargs):
    """transformers' attention-function signature; (output [rows, queries, heads, dim],
    None)."""
    if not _foldable(module, query, key, attention_mask, dropout, is_causal, kwargs):
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, is_causal=is_causal,
                                      **kwargs)
    rows, heads, queries, dim = query.shape
    kv_heads, keys = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    # query head h reads KV head h // groups (transformers' repeat_kv order)
    folded = query.reshape(rows, kv_heads, groups * queries, dim)
    mask = attention_mask.expand(attention_mask.shape[0], groups, queries, keys).reshape(
        attention_mask.shape[0], 1, groups * queries, keys)
    out = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=mask,
                                                           scale=scaling)
    return out.reshape(rows, heads, queries, value.shape[-1]).transpose(1, 2).contiguous(), None


def _foldable(module, query, key, mask, dropout, is_causal, kwargs) -> bool:
    """Grouped heads, a short call, one 4D mask for all heads, nothing sdpa would add."""
    heads, queries = query.shape[1], query.shape[2]
    kv_heads = key.shape[1]
    return (getattr(module, "num_key_value_groups", 1) > 1 and kv_heads < heads
            and heads % kv_heads == 0 and 2 <= queries <= FOLD_MAX_QUERIES
            and mask is not None and mask.dim() == 4 and mask.shape[1] == 1
            and mask.shape[2] == queries and mask.shape[3] == key.shape[2]
            and mask.shape[0] in (1, query.shape[0])
            and not dropout and not is_causal
            and kwargs.get("position_bias") is None and kwargs.get("softcap") is None
            and not kwargs.get("output_attentions", False))


def install() -> None:
    """Route transformers' `sdpa` attention through folded_sdpa (idempotent)."""
    ALL_ATTENTION_FUNCTIONS["sdpa"] = folded_sdpa
