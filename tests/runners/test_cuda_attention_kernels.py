"""On CUDA a run keeps cuDNN's SDPA kernel out of its masked attention (measured on an H200:
a plan built per shape cost 1.3 ms of host time a call; 1.8x the tokens/s without it,
docs/runner.md), and the provenance says which kernels torch could pick. Torch's flags are
process-wide settings the CPU build has too, so this runs here."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runners.backends.transformers import SDPA_FORCE_GQA, configure_device  # noqa: E402
from runners.models.provenance import _sdpa_kernels  # noqa: E402


@pytest.fixture
def cudnn_flag_restored():
    before = torch.backends.cuda.cudnn_sdp_enabled()
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


def test_a_cuda_run_leaves_cudnn_attention_out_and_records_it(cudnn_flag_restored):
    torch.backends.cuda.enable_cudnn_sdp(True)
    environ: dict = {}
    configure_device("cuda:1", environ)
    assert not torch.backends.cuda.cudnn_sdp_enabled()
    assert SDPA_FORCE_GQA not in environ  # the CPU's setting: GQA with a mask is math on CUDA
    assert "cudnn" not in _sdpa_kernels("cuda:1")
    assert "mem_efficient" in _sdpa_kernels("cuda:1")


def test_a_cpu_run_leaves_the_cuda_flags_alone(cudnn_flag_restored):
    torch.backends.cuda.enable_cudnn_sdp(True)
    configure_device("cpu", {})
    assert torch.backends.cuda.cudnn_sdp_enabled()
    assert _sdpa_kernels("cpu") is None
