"""De-quantising quanto weights once (runners.models.quantized) must not change a single bit.

The model is a small random Llama wide enough for quanto's int4 groups (128 columns);
it is built and quantised twice with optimum-quanto, and the second one's QLinears are
replaced. Logits
of the quanto model and of the copy must be equal exactly: prefill rows of several lengths,
a batch of rows, and the full model including the output head.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("optimum.quanto")


def _quantised_pair(scheme: str):
    from optimum.quanto import freeze, qint4, qint8, quantize
    from transformers import LlamaConfig, LlamaForCausalLM

    from runners.models.quantized import DequantizedLinear, dequantize_once

    def build():  # quanto tensors cannot be deep-copied: build the same model twice
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=300, hidden_size=128, intermediate_size=256,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=256, tie_word_embeddings=False)
        model = LlamaForCausalLM(config).eval()
        quantize(model, weights={"int8": qint8, "int4": qint4}[scheme])
        freeze(model)
        return model

    model, fast = build(), build()
    replaced = dequantize_once(fast)
    assert replaced == 2 * 7 + 1  # q k v o gate up down per layer, and the head
    assert sum(isinstance(m, DequantizedLinear) for m in fast.modules()) == replaced
    return model, fast


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_dequantized_once_gives_the_same_logits_bit_for_bit(scheme):
    quanto_model, fast = _quantised_pair(scheme)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for shape in [(1, 1), (1, 17), (6, 1), (3, 40)]:
            ids = torch.randint(0, 300, shape, generator=generator)
            expected = quanto_model(input_ids=ids).logits
            got = fast(input_ids=ids).logits
            assert torch.equal(expected, got), (scheme, shape)


def test_quantized_weights_really_are_quantised():
    """The replacement keeps the int4 grid: few distinct values per 128-column group."""
    _, fast = _quantised_pair("int4")
    from runners.models.quantized import DequantizedLinear

    layer = next(m for m in fast.modules() if isinstance(m, DequantizedLinear))
    group = layer.weight[0, :128]
    assert len(torch.unique(group)) <= 16
