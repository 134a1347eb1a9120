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
