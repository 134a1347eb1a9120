"""Numerics that say when they cannot decide: the fp32 head, margins and near-ties per
cell, and the start-up tree-mask probe (dtype-aware tolerance; a failure is reported, an
error that is not about masks is raised)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.harness.configs import CONFIG_IDS  # noqa: E402
from fragility_tui.items.item import Item  # noqa: E402
from runners.plan import numerics  # noqa: E402
from runners.backends.transformers import scoring  # noqa: E402
from runners.run.events import _other_line  # noqa: E402
from runners.plan.item_requests import Encoder, cells_for, plan_item  # noqa: E402
from runners.backends.transformers.scoring import Scorer  # noqa: E402

ITEM = Item("toy/1", "toy", None, "Which gas do plants absorb from the air?",
            ("oxygen", "nitrogen", "carbon dioxide", "helium"), 2)


def _cells(model, tokenizer, tolerance):
    scorer = Scorer(model, tokenizer, {tokenizer.eos_token_id})
    gen, lik = [], []
    plan = plan_item(Encoder(tokenizer, True), ITEM, list(CONFIG_IDS), 0, gen, lik)
    return cells_for(plan, scorer.score(gen, lik), "tiny", None, 0.0, tolerance)


def test_every_cell_gets_a_margin_and_near_tie_follows_the_tolerance(tiny_model, tiny_tokenizer):
    rows = _cells(tiny_model, tiny_tokenizer, numerics.tolerance("fp32"))
    assert len(rows) == 26 and all(r.margin is not None and r.margin >= 0 for r in rows)
    assert not any(r.near_tie for r in rows)  # a far-apart tiny model in fp32
    # A tolerance above every margin makes every cell a near-tie; the margins are unchanged.
    wide = {"generate": max(r.margin for r in rows) + 1,
            "likelihood": max(r.margin for r in rows) + 1}
    again = _cells(tiny_model, tiny_tokenizer, wide)
    assert all(r.near_tie for r in again)
    assert [r.margin for r in again] == pytest.approx([r.margin for r in rows], abs=1e-6)


def test_the_head_computes_in_fp32_for_a_bf16_model(tiny_tokenizer):
    from tiny_models import make_model

    model = make_model(tiny_tokenizer).to(torch.bfloat16)
    scorer = Scorer(model, tiny_tokenizer, {tiny_tokenizer.eos_token_id})
    assert scorer.calls.head_precision == "fp32"
    hidden = torch.randn(3, model.config.hidden_size, dtype=torch.bfloat16)
    logits = scorer.calls.head(hidden)
    assert logits.dtype == torch.float32
    exact = hidden.float() @ model.lm_head.weight.float().T
    assert torch.allclose(logits, exact, atol=1e-5)
    assert scorer.probe["ran"] and scorer.probe["passed"], scorer.probe  # bf16 tolerance


def test_a_failed_probe_falls_back_and_is_recorded(tiny_model, tiny_tokenizer, monkeypatch):
    monkeypatch.setitem(scoring.PROBE_TOLERANCE, torch.float32, -1.0)  # nothing passes
    scorer = Scorer(tiny_model, tiny_tokenizer, {tiny_tokenizer.eos_token_id})
    assert not scorer.packing
    probe = scorer.probe
    assert probe["ran"] and not probe["passed"] and probe["largest_difference"] >= 0
    record = numerics.provenance("fp32", scorer)
    assert record["mask_probe"] == probe and record["near_tie_tolerance"]["generate"] == 1e-3
    line = _other_line({"event": "probe_failed", "model": "tiny", "tolerance": -1.0,
                        "largest_difference": probe["largest_difference"], "error": None})
    assert line.startswith("warning: tiny: packed tree-mask scoring") and "tolerance" in line


def test_a_mask_error_falls_back_but_any_other_error_is_raised(tiny_model, tiny_tokenizer,
                                                              monkeypatch):
    def refuse(message):
        def score(self, gen, lik, **kw):
            raise RuntimeError(message)
        return score

    monkeypatch.setattr(Scorer, "score", refuse("this attention does not take a 4D mask"))
    scorer = Scorer(tiny_model, tiny_tokenizer, {tiny_tokenizer.eos_token_id})
    assert not scorer.packing and "4D mask" in scorer.probe["error"]
    monkeypatch.setattr(Scorer, "score", refuse("CUDA error: device-side assert"))
    with pytest.raises(RuntimeError, match="device-side"):
        Scorer(tiny_model, tiny_tokenizer, {tiny_tokenizer.eos_token_id})


def _emulated_mm(correct: bool):
    """torch.mm with CUDA's out_dtype product, emulated on the CPU (widened operands: the
    same products, fp32 accumulation); `correct=False` returns a wrong result."""
    real_mm = torch.mm

    def mm(a, b, *, out_dtype=None):
        if out_dtype is None:
            return real_mm(a, b)
        out = real_mm(a.to(out_dtype), b.to(out_dtype))
        return out if correct else out + 1.0
    return mm


def test_a_half_precision_head_multiplies_its_own_weights_where_the_device_can(monkeypatch):
    from runners.backends.transformers.model_probe import (FP32, FP32_ACCUMULATED,
                                                           fp32_accumulating_head,
                                                           fp32_projection)

    head = torch.nn.Linear(64, 300, bias=True).to(torch.bfloat16)
    weight = head.weight.detach()
    # torch 2.13 has the out_dtype product on CUDA only: on the CPU the fp32 copy stays
    assert fp32_accumulating_head(weight, head.bias) is None
    assert fp32_projection(head, torch.bfloat16)[1] == FP32
    monkeypatch.setattr(torch, "mm", _emulated_mm(correct=True))
    project = fp32_accumulating_head(weight, head.bias, devices=("cpu",))
    assert project is not None
    hidden = torch.randn(2, 5, 64).to(torch.bfloat16)
    logits = project(hidden)
    assert logits.dtype == torch.float32 and logits.shape == (2, 5, 300)
    exact = torch.nn.functional.linear(hidden.float(), weight.float(), head.bias.float())
    assert torch.allclose(logits, exact, atol=1e-5)
    # a product that disagrees with the widened one on the probe is not used
    monkeypatch.setattr(torch, "mm", _emulated_mm(correct=False))
    assert fp32_accumulating_head(weight, head.bias, devices=("cpu",)) is None


def test_a_wider_hidden_state_keeps_the_fp32_copy(monkeypatch):
    """Rounding an fp32 hidden state to bf16 for the weights' own product would lose what
    the fp32 copy keeps: the product is used only for hidden states of the weights' dtype."""
    from runners.backends.transformers import model_probe

    asked = []
    monkeypatch.setattr(model_probe, "fp32_accumulating_head",
                        lambda weight, bias: asked.append(weight.dtype) or (lambda h: h))
    head = torch.nn.Linear(64, 300, bias=False).to(torch.bfloat16)
    assert model_probe.fp32_projection(head, torch.float32)[1] == model_probe.FP32
    assert asked == []
    assert model_probe.fp32_projection(head, torch.bfloat16)[1] == model_probe.FP32_ACCUMULATED
    assert asked == [torch.bfloat16]


@pytest.mark.parametrize("spread", [0.5, 8.0, 30.0, 500.0])
def test_the_cpu_logsumexp_is_torchs_bit_for_bit(spread):
    """prefill.logsumexp_rows floors x - max at -87 on the CPU, where exp of a far-negative
    input takes a slow path: the value stays torch.logsumexp's, for narrow and very wide
    logits alike, with -inf entries, a row of -inf and a NaN."""
    from runners.backends.transformers.prefill import logsumexp_rows

    generator = torch.Generator().manual_seed(int(spread * 10))
    logits = torch.randn(48, 49152, generator=generator) * spread
    logits[3, :100] = float("-inf")
    assert torch.equal(logsumexp_rows(logits), torch.logsumexp(logits, dim=-1))
    logits[5] = float("-inf")
    logits[7, 9] = float("nan")
    torch.testing.assert_close(logsumexp_rows(logits), torch.logsumexp(logits, dim=-1),
                               rtol=0, atol=0, equal_nan=True)
