"""fp32 CPU linears through oneDNN on packed weights (runners.models.cpu_linear): same outputs as
torch's sgemm to fp32 rounding, swapped only when measured faster and in agreement."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runners.backends.transformers import configure_device  # noqa: E402
from runners.models import cpu_linear  # noqa: E402
from runners.models.cpu_linear import PackedLinear, pack_linears  # noqa: E402
from runners.backends.transformers.model_probe import split_output_head  # noqa: E402
from tiny_models import make_model  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(torch.ops.mkldnn, "_linear_pointwise"),
                                reason="this torch has no oneDNN linear")


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(7, 48), (3, 5, 48)], ids=["2d", "3d"])
def test_a_packed_linear_computes_what_the_linear_does(bias, shape):
    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 96, bias=bias)
    hidden = torch.randn(*shape)
    with torch.no_grad():
        expected, got = linear(hidden), PackedLinear(linear)(hidden)
    assert got.shape == expected.shape == (*shape[:-1], 96)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5)


def _faster(monkeypatch, dense_s=2.0, packed_s=1.0, difference=1e-7):
    monkeypatch.setattr(cpu_linear, "measure", lambda linear: {
        "dense_s": dense_s, "packed_s": packed_s, "largest_difference": difference,
        "packed": PackedLinear(linear)})


def test_a_model_computes_the_same_logits_after_the_swap(tiny_tokenizer, monkeypatch):
    _faster(monkeypatch)  # whatever this CPU measures: the swap itself is under test
    dense, packed = make_model(tiny_tokenizer), make_model(tiny_tokenizer)
    linears = sum(type(m) is torch.nn.Linear for m in packed.modules())
    record = pack_linears(packed)
    assert record["kernel"].startswith("oneDNN") and record["modules"] == linears == 2 * 7 + 1
    # probed on the shape holding the most weight: in this tiny model the head (400 x 48)
    # outweighs the MLP's 2 x 2 (96 x 48) matrices
    assert record["speedup"] == 2.0 and record["probe_shape"] == [256, 48, 400]
    assert not any(type(m) is torch.nn.Linear for m in packed.modules())
    ids = torch.tensor([[1, 5, 9, 13, 2, 7]])
    with torch.no_grad():
        assert torch.allclose(packed(ids).logits, dense(ids).logits, atol=1e-5)
    # the scorer's output head on a packed head computes in fp32, as on the dense one
    from runners.backends.transformers.model_probe import cache_keyword

    _, head, precision = split_output_head(packed, cache_keyword(packed), "cpu")
    assert precision == "fp32" and isinstance(packed.get_output_embeddings(), PackedLinear)


@pytest.mark.parametrize("dense_s, difference, reason", [
    (1.05, 1e-7, "oneDNN not faster here"),
    (2.0, 1e-2, "oneDNN disagreed with sgemm"),
])
def test_nothing_is_swapped_unless_faster_and_in_agreement(tiny_tokenizer, monkeypatch,
                                                           dense_s, difference, reason):
    _faster(monkeypatch, dense_s=dense_s, difference=difference)
    model = make_model(tiny_tokenizer)
    record = pack_linears(model)
    assert record["kernel"] == "torch default" and record["reason"] == reason
    assert not any(isinstance(m, PackedLinear) for m in model.modules())


def test_half_precision_and_quantised_linears_are_left_alone(tiny_tokenizer, monkeypatch):
    _faster(monkeypatch)
    model = make_model(tiny_tokenizer).to(torch.bfloat16)  # torch sends bf16 to oneDNN itself
    assert pack_linears(model) == {"kernel": "torch default",
                                   "reason": "no fp32 nn.Linear on the CPU"}

    class Quantised(torch.nn.Linear):  # a subclass (as optimum-quanto's QLinear is)
        pass

    holder = torch.nn.Sequential(Quantised(8, 8))
    assert pack_linears(holder)["kernel"] == "torch default"
    assert type(holder[0]) is Quantised


def test_the_measurement_runs_both_kernels_on_the_model_shape():
    linear = torch.nn.Linear(48, 96)
    probe = cpu_linear.measure(linear)
    assert probe["dense_s"] > 0 and probe["packed_s"] > 0
    assert probe["largest_difference"] < cpu_linear.AGREEMENT_RTOL


def test_each_weight_is_reordered_once_the_probed_one_included(tiny_tokenizer, monkeypatch):
    """The probe's packed module replaces the probed linear: no second reorder."""
    timings = iter([2.0, 1.0])  # dense, then packed: oneDNN measured faster
    monkeypatch.setattr(cpu_linear, "_seconds", lambda call, hidden: next(timings))
    reorders = []
    original = torch.ops.mkldnn._reorder_linear_weight
    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight",
                        lambda *a: reorders.append(1) or original(*a))
    model = make_model(tiny_tokenizer)
    linears = sum(type(m) is torch.nn.Linear for m in model.modules())
    assert pack_linears(model)["modules"] == linears
    assert len(reorders) == linears


def test_the_switch_keeps_torch_s_kernel(tiny_tokenizer, monkeypatch):
    _faster(monkeypatch)
    monkeypatch.setenv(cpu_linear.SWITCH, "default")
    model = make_model(tiny_tokenizer)
    assert pack_linears(model)["reason"] == "FRAGILITY_CPU_LINEAR=default"
    assert not any(isinstance(m, PackedLinear) for m in model.modules())


def test_the_onednn_primitive_cache_is_bounded_before_its_first_primitive(tiny_tokenizer,
                                                                           monkeypatch):
    """oneDNN reads its cache capacity once, at its first primitive (the probe at the
    latest): the transformers backend sets it before it loads a model, pack_linears records
    it, and a value the user set stays."""
    seen = {}

    def probe(linear):
        seen["capacity"] = cpu_linear.os.environ.get(cpu_linear.PRIMITIVE_CACHE)
        return {"dense_s": 2.0, "packed_s": 1.0, "largest_difference": 1e-7,
                "packed": PackedLinear(linear)}

    monkeypatch.setattr(cpu_linear, "measure", probe)
    monkeypatch.setenv(cpu_linear.PRIMITIVE_CACHE, "unset")  # restored (or removed) after
    monkeypatch.delenv(cpu_linear.PRIMITIVE_CACHE)
    configure_device("cpu", cpu_linear.os.environ)
    record = pack_linears(make_model(tiny_tokenizer))
    assert seen["capacity"] == record["primitive_cache_capacity"] == "16"
    monkeypatch.setenv(cpu_linear.PRIMITIVE_CACHE, "1024")
    configure_device("cpu", cpu_linear.os.environ)
    assert pack_linears(make_model(tiny_tokenizer))["primitive_cache_capacity"] == "1024"
