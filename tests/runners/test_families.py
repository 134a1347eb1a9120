"""Every model family loads and scores: tiny random models (tests/runners/family_cases.py)
of each architecture, saved as folders and loaded the way `run --model FOLDER` loads them,
score all 26 configs equal to the plain loop (runners/backends/transformers/plain_loop.py)
and record the attention implementation that ran: sdpa where transformers' class supports
it, eager where it does not (Gemma 2, gpt-oss).

Device and dtype come from FRAGILITY_TEST_DEVICE (default cpu) and FRAGILITY_TEST_DTYPE
(default fp32): `FRAGILITY_TEST_DEVICE=cuda FRAGILITY_TEST_DTYPE=bf16` runs the same cases
on a GPU, as `make gpu-check` does. In fp32 the cells must match closely (log-likelihoods
within 1e-4, generations a prefix of generate's, same prediction but for fp32 near-ties);
in a half dtype every prediction that differs must be a near-tie of that dtype."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from family_cases import (  # noqa: E402
    FAMILIES, compare_with_plain_loop, device_and_dtype, expected_attention, tiny_folder)
from tiny_models import make_tokenizer  # noqa: E402

DEVICE, DTYPE = device_and_dtype()


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_family_loads_and_scores_like_the_plain_loop(tmp_path, model_type):
    from runners.models.prepare import load_spec

    attention = expected_attention(model_type)
    torch.set_num_threads(1)
    folder = tiny_folder(tmp_path, model_type, make_tokenizer())
    loaded = load_spec(str(folder), dtype=DTYPE, device=DEVICE)
    # What really ran is what was asked for, and both the fingerprint and the provenance
    # (which `runs show` prints) say it.
    assert loaded.model.config._attn_implementation == attention
    assert loaded.fingerprint["attn_implementation"] == attention
    assert loaded.provenance["attn_implementation"] == attention
    summary = compare_with_plain_loop(loaded)
    assert summary["cells"] == 2 * 26
    assert not summary["outside"], (model_type, DEVICE, DTYPE, summary["outside"])
    if DTYPE != "fp32":
        return
    for row, reference in summary["pairs"]:
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


@pytest.mark.skipif(DEVICE != "cpu", reason="oneDNN packed linears are a CPU path")
@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_family_computes_the_same_logits_with_packed_linears(tmp_path, model_type,
                                                             monkeypatch):
    """runners.models.cpu_linear swaps every fp32 nn.Linear for oneDNN on a packed weight
    when that is measured faster; forced here, each family's logits stay those of torch's
    own kernel (fused MoE expert weights are not nn.Linear and stay as they are)."""
    from runners.models import cpu_linear
    from runners.models.prepare import load_spec

    torch.set_num_threads(1)
    folder = tiny_folder(tmp_path, model_type, make_tokenizer())
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
