"""Every model family loads and scores: tiny random models (2 layers, hidden 64, the trained
byte-level BPE of tiny_models.py) of each architecture, saved as folders and loaded the way
`run --model FOLDER` loads them, score all 26 configs equal to the plain loop
(runners/backends/transformers/plain_loop.py) in fp32, and record the attention implementation that ran: sdpa
where transformers' class supports it, eager where it does not (Gemma 2, gpt-oss)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.harness.configs import CONFIG_IDS  # noqa: E402
from fragility_tui.items.item import Item  # noqa: E402
from runners.plan.item_requests import Encoder, cells_for, plan_item  # noqa: E402
from runners.backends.transformers.plain_loop import reference_cell  # noqa: E402
from runners.backends.transformers.scoring import Scorer  # noqa: E402
from tiny_models import make_tokenizer  # noqa: E402

ITEMS = [
    Item("toy/1", "toy", None, "Which gas do plants absorb from the air?",
         ("oxygen", "nitrogen", "carbon dioxide", "helium"), 2),
    Item("toy/2", "toy", "geo", "What is the capital of France?",
         ("Paris", "Rome", "Berlin", "Madrid"), 0),
]
SEED = 0
MOE = {"num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
       "moe_intermediate_size": 32}
# model_type -> (extra config, the attention implementation it must run with)
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
    "gemma4_text": ({"sliding_window": 24}, "sdpa"),
}


def _tiny_folder(root, model_type: str, extra: dict, tokenizer):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        model_type, vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=1024, initializer_range=0.5,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, **extra)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    folder = root / f"tiny-{model_type}-instruct"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_family_loads_and_scores_like_the_plain_loop(tmp_path, model_type):
    from runners.models.prepare import load_spec

    extra, attention = FAMILIES[model_type]
    torch.set_num_threads(1)
    tokenizer = make_tokenizer()
    folder = _tiny_folder(tmp_path, model_type, extra, tokenizer)
    loaded = load_spec(str(folder), dtype="fp32", device="cpu")
    # What really ran is what was asked for, and both the fingerprint and the provenance
    # (which `runs show` prints) say it.
    assert loaded.model.config._attn_implementation == attention
    assert loaded.fingerprint["attn_implementation"] == attention
    assert loaded.provenance["attn_implementation"] == attention
    scorer = Scorer(loaded.model, loaded.tokenizer, loaded.eos_ids)
    encoder = Encoder(loaded.tokenizer, loaded.is_instruct, loaded.template_args)
    gen, lik = [], []
    plans = [plan_item(encoder, item, list(CONFIG_IDS), SEED, gen, lik) for item in ITEMS]
    result = scorer.score(gen, lik)
    rows = [row for plan in plans for row in cells_for(plan, result, "tiny", None, 0.0)]
    assert len(rows) == len(ITEMS) * 26
    by_item = {item.item_uid: item for item in ITEMS}
    for row in rows:
        reference = reference_cell(loaded.model, loaded.tokenizer, by_item[row.item_uid],
                                   row.config_id, SEED, chat=loaded.is_instruct,
                                   template_args=loaded.template_args)
        where = (model_type, row.item_uid, row.config_id)
        assert row.near_tie is False or reference.margin < 1e-3, where  # fp32, far apart
        if reference.scores is not None:
            assert row.scores == pytest.approx(reference.scores, abs=1e-4), where
            assert row.margin == pytest.approx(reference.margin, abs=1e-4), where
        else:
            # Our margin covers the steps up to the deciding one; generate's, every step.
            assert row.margin >= reference.margin - 1e-4, where  # early stop may cut the text once the parse is fixed: ours is a prefix
            assert reference.output.startswith(row.raw_output), (where, row.raw_output,
                                                                 reference.output)
        assert row.pred == reference.pred or reference.margin < 1e-4, where


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_family_computes_the_same_logits_with_packed_linears(tmp_path, model_type,
                                                             monkeypatch):
    """runners.models.cpu_linear swaps every fp32 nn.Linear for oneDNN on a packed weight when
    that is measured faster; forced here, each family's logits stay those of torch's own
    kernel (fused MoE expert weights are not nn.Linear and stay as they are)."""
    from runners.models import cpu_linear
    from runners.models.prepare import load_spec

    torch.set_num_threads(1)
    folder = _tiny_folder(tmp_path, model_type, FAMILIES[model_type][0], make_tokenizer())
    monkeypatch.setenv(cpu_linear.SWITCH, "default")
    dense = load_spec(str(folder), dtype="fp32", device="cpu")
    assert dense.provenance["cpu_linear"]["kernel"] == "torch default"
    monkeypatch.delenv(cpu_linear.SWITCH)
    monkeypatch.setattr(cpu_linear, "measure", lambda linear: {
        "dense_s": 2.0, "packed_s": 1.0, "largest_difference": 0.0,
        "packed": cpu_linear.PackedLinear(linear)})
    packed = load_spec(str(folder), dtype="fp32", device="cpu")
    record = packed.provenance["cpu_linear"]
    assert record["kernel"].startswith("oneDNN") and record["modules"] >= 2 * 4 + 1, record
    ids = torch.tensor([[1, 5, 9, 13, 2, 7, 11, 3]])
    with torch.no_grad():
        expected, got = dense.model(ids).logits, packed.model(ids).logits
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-5), model_type
