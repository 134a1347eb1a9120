"""The transformers backend: batched prefix-tree scoring of local weights in this process.

`scoring.Scorer` scores a batch over its prompt tree, with `prefill`, `decoding`, `kv_pool`,
`model_calls`, `model_probe` and `folded_attention` as its parts; `memory` sizes the token
budget from the device's memory; `plain_loop` is a deliberately plain one-prompt-at-a-time
implementation the tests compare it with.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from runners.backends.base import LocalBackend, register_backend

# Masked attention on a CPU: let SDPA read the shared KV heads itself rather than have
# transformers copy them once per query head (a third of decoding time for SmolLM2). On CUDA
# a mask with GQA would fall back to the math kernel: not there.
SDPA_FORCE_GQA = "TRANSFORMERS_SDPA_FORCE_GQA"

SCORING_TEXT = {
    "padding": "prefill: a row per prefix-tree fragment, its prefix gathered and left-padded, "
               "its tokens right-padded, masked; decoding: a row per group of prompts, "
               "left-padded, masked (batching.*.layout)",
    "decoding": "greedy; stop at EOS, max_new_tokens, or once the parse is decided",
    "likelihood": "lm-eval loglikelihood; acc_norm = ll / option length in characters",
}


def configure_device(device: str, environ: MutableMapping[str, str]) -> None:
    """The variables transformers and oneDNN read on first use, for `device` (oneDNN's
    kernel cache: runners.models.cpu_linear says why it is bounded), and on CUDA the
    attention kernels the scorer's masked calls may use."""
    from runners.models import cpu_linear

    if device.startswith("cpu"):
        environ.setdefault(SDPA_FORCE_GQA, "1")
        environ.setdefault(cpu_linear.PRIMITIVE_CACHE, str(cpu_linear.PRIMITIVE_CACHE_CAPACITY))
    elif device.startswith("cuda"):
        keep_cudnn_out_of_attention()


def keep_cudnn_out_of_attention() -> None:
    """cuDNN's SDPA kernel (torch's first choice for a masked call on Hopper) builds an
    execution plan for every new shape: 1.3 ms of host time a call on an H200, with the GPU
    busy 38% of the time (benchmarks/gpu_profile.py), and a run's shapes change with every
    call. Without it torch takes the memory-efficient kernel: 1.75-1.85x the tokens/s of an
    8B model at the real budget (benchmarks/gpu_sdpa_ab.py; docs/runner.md, GPU figures).
    Process-wide, as torch's flag is."""
    import torch

    torch.backends.cuda.enable_cudnn_sdp(False)


@register_backend("transformers")
class TransformersBackend(LocalBackend):
    name = "transformers"
    overlaps_host_work = True  # its model calls leave the host thread free

    def load(self, prepared, spec) -> tuple:
        from runners.backends.transformers.scoring import Scorer
        from runners.models.load import load_model

        configure_device(prepared.device, self.environ)
        loaded = load_model(prepared.spec, quantize=spec.quantize,
                            trust_remote_code=spec.trust_remote_code, prepared=prepared)
        scorer = Scorer(loaded.model, loaded.tokenizer, loaded.eos_ids,
                        max_new_tokens=spec.max_new_tokens, prefix_reuse=spec.prefix_reuse)
        return loaded, scorer

    def budget(self, spec, loaded, scorer):
        from runners.backends.transformers.memory import initial_budget

        return initial_budget(scorer.kv_bytes_per_token, loaded.device, loaded.model.config,
                              {"fp32": 4, "fp16": 2, "bf16": 2}.get(loaded.dtype, 4),
                              tokens=spec.batch_tokens, item_cap=spec.batch_size,
                              max_new_tokens=spec.max_new_tokens)

    def scoring_text(self) -> dict:
        return dict(SCORING_TEXT)
