"""The loader of a backend other than transformers (vLLM, a served model), imported only when a
run uses it: above prepare.py and the backends, which import prepare's pieces themselves."""

from __future__ import annotations

from fragility_tui.errors import InputError


def backend_loader(backend: str):
    """load(prepared, spec) -> (LoadedModel, scorer) for a backend other than transformers,
    imported only when a run uses it."""
    if backend == "vllm":  # experimental: runners/vllm_backend.py
        from runners.vllm_backend import load_vllm

        return load_vllm
    if backend == "openai":  # a served model: runners/openai_backend.py
        from runners.openai_backend import load_served

        return load_served
    raise InputError(f"unknown backend {backend!r}", field="--backend")
