"""What the scorer needs to know about a loaded model, found by probing it: its attention
layout (sliding windows, layer types), the name of its cache argument, whether its output
head can run apart from the decoder, and the KV bytes one token costs."""

from __future__ import annotations

import inspect

import torch


def attention_layout(config) -> tuple[list | None, int | None, bool]:
    """(layer types when mixed, the sliding window, whether tree masks can express the
    model's attention). Chunked or other attention kinds get one node per row instead."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    window = getattr(text, "sliding_window", None)
    layer_types = getattr(text, "layer_types", None)
    if layer_types:
        kinds = set(layer_types)
        if kinds - {"full_attention", "sliding_attention"}:
            return None, None, False
        if "sliding_attention" not in kinds:
            return None, None, True
        return (list(layer_types) if "full_attention" in kinds else None), window, True
    if getattr(text, "use_sliding_window", True) is False:
        window = None
    return None, window, True


def cache_keyword(module) -> str:
    # transformers 5.x renames past_key_values to cache (the old name warns).
    params = inspect.signature(module.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def kv_bytes_per_token(model, cache_kw: str, device) -> int:
    """Bytes of keys and values one token adds to the cache, measured on a probe forward
    (so grouped-query attention, shared KV layers and the dtype count as they are)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    probe = torch.arange(1, 5, device=device)[None] % model.config.vocab_size
    with torch.no_grad():
        model(input_ids=probe, use_cache=True, **{cache_kw: cache})
    total = sum(t.numel() * t.element_size() for layer in cache.layers
                for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
                if t is not None)
    return max(1, total // probe.shape[1])


FP32 = "fp32"
FP32_ACCUMULATED = "fp32 (half-precision weights, fp32 accumulation and result: no fp32 copy)"


def fp32_projection(lm_head, hidden_dtype: torch.dtype | None = None):
    """The output head computed in fp32 whatever the model's dtype: a bf16 head rounds a
    logit of 20 to steps of 0.125, wider than the gaps that decide close cells. A plain
    Linear in a half dtype multiplies its own weights with fp32 accumulation where the
    device has that product (fp32_accumulating_head), else gets an fp32 copy of its weights
    (vocabulary x hidden x 4 bytes, kept for the run); other heads (quantised modules) run
    as they are, then widen. `hidden_dtype`: what the decoder hands the head; the weights'
    own product needs it in their dtype (a wider one would be rounded). Returns
    (projection, its precision in words, or None when it does not compute in fp32)."""
    from runners.models.cpu_linear import PackedLinear

    if type(lm_head) is PackedLinear:  # fp32 by construction
        return lm_head, FP32
    weight = getattr(lm_head, "weight", None)
    plain = (type(lm_head) is torch.nn.Linear and type(weight) in (torch.Tensor, torch.nn.Parameter))
    if not plain or weight.dtype == torch.float32:
        return (lambda hidden: lm_head(hidden).float()), FP32 if plain else None
    accumulated = (fp32_accumulating_head(weight.detach(), lm_head.bias)
                   if hidden_dtype == weight.dtype else None)
    if accumulated is not None:
        return accumulated, FP32_ACCUMULATED
    weight32 = weight.detach().float()
    bias32 = lm_head.bias.detach().float() if lm_head.bias is not None else None
    return (lambda hidden: torch.nn.functional.linear(hidden.float(), weight32, bias32)), FP32


def fp32_accumulating_head(weight: torch.Tensor, bias, *, devices=("cuda",)):
    """The head as torch.mm(hidden, weight.T, out_dtype=float32) on the half-precision
    weights themselves: the product of two bf16 (or fp16) values is exact in fp32, so with
    fp32 accumulation this is the fp32 copy's product up to summation order, without the
    copy (2.1 GB on an 8B model). None where the device lacks that product (torch 2.13
    has it on CUDA only) or where it differs from the widened product on a probe slice."""
    if weight.device.type not in devices:
        return None
    bias32 = bias.detach().float() if bias is not None else None

    def project(hidden: torch.Tensor, rows: torch.Tensor = weight) -> torch.Tensor:
        flat = hidden.reshape(-1, hidden.shape[-1])
        out = torch.mm(flat, rows.t(), out_dtype=torch.float32)
        if bias32 is not None:
            out = out + bias32[:rows.shape[0]]
        return out.reshape(*hidden.shape[:-1], rows.shape[0])

    generator = torch.Generator(device=weight.device).manual_seed(0)
    probe = torch.randn(3, weight.shape[1], generator=generator, device=weight.device,
                        dtype=torch.float32).to(weight.dtype)
    rows = weight[:256]
    try:
        got = project(probe, rows)
    except (RuntimeError, TypeError, NotImplementedError):  # no such kernel here
        return None
    expected = torch.nn.functional.linear(probe.float(), rows.float(),
                                          None if bias32 is None else bias32[:rows.shape[0]])
    scale = max(1.0, float(expected.abs().max()))
    if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4 * scale):
        return None
    return project


def split_output_head(model, cache_kw: str, device):
    """(decoder, head, head precision) such that head(decoder(...).last_hidden_state) ==
    model(...).logits up to the model dtype's rounding, checked on a probe input; (model,
    float, ...) when the model cannot be split that way (its logits are then rounded to
    the model's dtype before they widen)."""
    dtype = getattr(model, "dtype", torch.float32)
    whole = (model, lambda logits: logits.float(),
             "fp32" if dtype == torch.float32 else f"{dtype} (whole-model logits)")
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    lm_head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if decoder is None or lm_head is None or decoder is model:
        return whole
    if cache_keyword(decoder) != cache_kw:
        return whole
    softcap = getattr(model.config, "final_logit_softcapping", None)
    probe = torch.arange(1, 6, device=device)[None] % model.config.vocab_size
    with torch.no_grad():
        try:
            expected = model(input_ids=probe).logits[0].float()
            hidden = decoder(input_ids=probe).last_hidden_state[0]
        except Exception:  # an architecture that needs more than input_ids to run alone
            return whole
        project, precision = fp32_projection(lm_head, hidden.dtype)

        def head(features: torch.Tensor) -> torch.Tensor:
            logits = project(features)
            if softcap is not None:
                logits = torch.tanh(logits / softcap) * softcap
            return logits

        got = head(hidden)
    # The model's own logits are rounded to its dtype; ours are not: allow that rounding.
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    tol = max(1e-4, 8 * eps)
    if got.shape != expected.shape or not torch.allclose(
            got, expected, rtol=tol, atol=tol * max(1.0, float(expected.abs().max()))):
        return whole
    return decoder, head, precision or f"{dtype} (a quantised head, widened after)"
