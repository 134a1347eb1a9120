"""What computes the cells: one table of the runner's backends and what each can do.

Torch-free, so the CLI's `--backend` choices, the run form and the run command's checks read
the same table without loading a runner. The code of each backend lives in
`runners/backends/` (one module each, registered under the same name); adding a backend is
one row here and one module there (docs/architecture.md, "Adding a backend").
"""

from __future__ import annotations

from dataclasses import dataclass

from fragility_tui.errors import InputError


@dataclass(frozen=True)
class BackendInfo:
    name: str
    module: str  # runners.backends.<module>: imported only when a run uses the backend
    summary: str  # one line for help texts and the docs
    local_weights: bool = True  # loads a model's weights in this process (else: a server)
    one_model_per_run: bool = False  # one --model per process (an engine holds the GPU)
    device_slot: bool = True  # takes a device slot (fragility_tui/slots.py) before it runs
    ray: bool = True  # `run --ray` can shard it over workers
    server_flags: bool = False  # takes --base-url, --served-model, --api-key-env, ...
    quantize: bool = True  # --quantize int8|int4 (optimum-quanto builds) applies
    schedules_own_memory: bool = False  # its engine or server sizes its batches
    experimental: bool = False


BACKENDS: dict[str, BackendInfo] = {b.name: b for b in (
    BackendInfo("transformers", "transformers",
                "batched prefix-tree scoring in this process (default)"),
    BackendInfo("vllm", "vllm", "an offline vLLM engine with prefix caching on a CUDA GPU",
                one_model_per_run=True, quantize=False, schedules_own_memory=True,
                experimental=True),
    BackendInfo("openai", "openai", "a model an OpenAI-compatible server serves",
                local_weights=False, device_slot=False, ray=False, server_flags=True,
                quantize=False, schedules_own_memory=True),
)}
DEFAULT_BACKEND = "transformers"


def backend_names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def backend_info(name: str | None) -> BackendInfo:
    """The table's row for `name` (None: the default); an unknown name is the user's error."""
    info = BACKENDS.get(name or DEFAULT_BACKEND)
    if info is None:
        raise InputError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}",
                         field="--backend")
    return info


def served_backends() -> tuple[str, ...]:
    """The backends that evaluate a model a server serves (they take the server flags)."""
    return tuple(name for name, info in BACKENDS.items() if info.server_flags)
