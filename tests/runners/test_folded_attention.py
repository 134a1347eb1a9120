"""Grouped KV heads folded into the query (runners.backends.transformers.folded_attention): the same output as
transformers' sdpa, used by the scorer's decoding steps, and never for calls it cannot fold."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS  # noqa: E402

from runners.backends.transformers import folded_attention  # noqa: E402
from runners.backends.transformers.folded_attention import folded_sdpa  # noqa: E402
from test_scoring import _assert_matches_reference, _scorer  # noqa: E402


class Attention(torch.nn.Module):
    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


def _inputs(rows=3, heads=6, kv_heads=2, queries=4, keys=20, dtype=torch.float32, seed=0,
            mask_rows=None, boolean=False):
    g = torch.Generator().manual_seed(seed)
    # the layouts the scorer hands over: queries transposed from [rows, queries, heads, dim],
    # keys and values strided views of a token-major buffer with room
    query = torch.randn(rows, queries, heads, 8, generator=g, dtype=dtype).transpose(1, 2)
    key = torch.randn(rows, keys + 5, kv_heads, 8, generator=g, dtype=dtype)[:, :keys].transpose(1, 2)
    value = torch.randn(rows, keys + 5, kv_heads, 8, generator=g, dtype=dtype)[:, :keys].transpose(1, 2)
    visible = torch.rand(mask_rows or rows, 1, queries, keys, generator=g) < 0.6
    visible[..., 0] = True  # no query sees nothing
    if boolean:
        return query, key, value, visible
    mask = torch.zeros(visible.shape, dtype=dtype).masked_fill_(~visible, torch.finfo(dtype).min)
    return query, key, value, mask


@pytest.mark.parametrize("queries", [2, 4, 16])
@pytest.mark.parametrize("case", ["float", "bool", "broadcast-rows", "bf16"])
def test_folded_output_equals_transformers_sdpa(queries, case):
    dtype = torch.bfloat16 if case == "bf16" else torch.float32
    query, key, value, mask = _inputs(queries=queries, dtype=dtype, boolean=case == "bool",
                                      mask_rows=1 if case == "broadcast-rows" else None)
    module = Attention(groups=3)
    ours, _ = folded_sdpa(module, query, key, value, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.3)
    assert ours.shape == theirs.shape == (3, queries, 6, 8)
    assert ours.is_contiguous()
    tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-6
    assert torch.allclose(ours.float(), theirs.float(), atol=tolerance, rtol=0)


@pytest.mark.parametrize("case", ["one query", "long call", "no grouping", "no mask",
                                  "per-head mask", "softcap", "dropout"])
def test_calls_it_cannot_fold_go_to_transformers(monkeypatch, case):
    queries = {"one query": 1, "long call": 17}.get(case, 4)
    query, key, value, mask = _inputs(queries=queries,
                                      kv_heads=6 if case == "no grouping" else 2)
    module = Attention(groups=1 if case == "no grouping" else 3)
    if case == "no mask":
        mask = None
    if case == "per-head mask":
        mask = mask.expand(3, 6, queries, 20)
    extra = {"softcap": 30.0} if case == "softcap" else {}
    dropout = 0.1 if case == "dropout" else 0.0
    delegated = []
    monkeypatch.setattr(folded_attention, "sdpa_attention_forward",
                        lambda *a, **k: delegated.append(k) or ("theirs", None))
    assert folded_sdpa(module, query, key, value, mask, dropout=dropout, **extra)[0] == "theirs"
    assert delegated and delegated[0]["dropout"] == dropout
    assert all(delegated[0][k] == v for k, v in extra.items())


def test_the_scorer_installs_it_and_its_decoding_steps_fold(tiny_model, tiny_tokenizer,
                                                             monkeypatch):
    """The tiny Llama has 4 query heads over 2 KV heads: decoding rows of several leaves
    fold, and all 26 configs still equal the plain loop."""
    folded = []
    real = folded_attention._foldable

    def spy(module, query, *args):
        ok = real(module, query, *args)
        folded.append((query.shape[2], ok))
        return ok

    monkeypatch.setattr(folded_attention, "_foldable", spy)
    scorer = _scorer(tiny_model, tiny_tokenizer)
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is folded_sdpa
    folded.clear()  # the start-up probe's calls
    _assert_matches_reference(tiny_model, tiny_tokenizer, scorer, instruct=True)
    assert any(ok for _, ok in folded)
    assert not any(ok for queries, ok in folded if not 2 <= queries <= 16)
