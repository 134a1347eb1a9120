"""The backend protocol and its lazy registry: what the run loop asks of whatever computes
the cells, and where it finds it by name.

A backend module (one per backend under runners/backends/) decorates its class with
`@register_backend("name")`; `backend_for(name)` imports that module only when a run uses
it (the module named in fragility_tui/backends.py's table, which the CLI reads without
loading torch), as lm-eval's `@register_model` and Inspect's `@modelapi` do. The loop never
compares backend names: it asks the backend (docs/architecture.md, "Adding a backend").
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Protocol

from fragility_tui.backends import BackendInfo, backend_info

if TYPE_CHECKING:
    from runners.plan.budget import TokenBudget


class Backend(Protocol):
    """What a run needs of a backend; one instance serves one run (it may keep what
    `configure_process` decided for `load`)."""

    info: BackendInfo
    overlaps_host_work: bool  # plan and write on a host thread beside its model calls

    def configure_process(self, environ: MutableMapping[str, str]) -> dict:
        """Set the library variables that must be set before the libraries are imported
        or the device is first used; returns what was decided, for the run's provenance."""

    def prepare(self, spec, device: str) -> list:
        """The run's models prepared for `device` without loading weights (names,
        fingerprints)."""

    def load(self, prepared, spec) -> tuple:
        """(LoadedModel, scorer) for one prepared model."""

    def budget(self, spec, loaded, scorer) -> "TokenBudget":
        """The token budget the run's batches start from."""

    def scoring_text(self) -> dict:
        """How it pads, decodes and scores, in words, for the harness disclosure card."""

    def text_encoder(self, scorer):
        """What turns the planner's prompts into requests: None for token ids of the
        model's own tokenizer, else an encoder of text (a served model)."""

    def watch_stop(self, scorer, should_stop: Callable[[], bool]) -> None:
        """Let the scorer ask the run's stop check while a batch is in flight (a served
        model shuts its requests); a local model stops between batches."""

    def watch_retries(self, scorer, on_event: Callable[..., None]) -> None:
        """Let the scorer tell the run, `on_event(kind, **fields)`, that a request waits to
        be retried (`request_retry`) and that a retried one was answered
        (`request_recovered`): a served model's progress line says so while it lasts. A
        local model has no requests to retry."""


_REGISTRY: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, info: BackendInfo | None = None):
    """Class decorator: the backend `name` is made by calling the class. `info` adds a row
    to the table at run time (a backend outside the shipped table, e.g. a test's)."""
    def register(factory):
        if info is not None:
            from fragility_tui.backends import BACKENDS

            BACKENDS[name] = info
        _REGISTRY[name] = factory
        return factory
    return register


def backend_for(name: str | None) -> Backend:
    """A new instance of the backend `name`, importing its module the first time."""
    info = backend_info(name)  # an unknown name: InputError naming --backend
    if info.name not in _REGISTRY:
        importlib.import_module(f"runners.backends.{info.module}")
    return _REGISTRY[info.name]()


def configure_allocator(environ: MutableMapping[str, str] = os.environ) -> dict:
    """Ask PyTorch's CUDA allocator for expandable segments (a budget halved after an
    out-of-memory then fits into the freed memory instead of beside fragments of it),
    unless the user configured the allocator. Must run before CUDA is first used; what was
    decided goes into the run's provenance."""
    torch = sys.modules.get("torch")
    late = bool(torch is not None and torch.cuda.is_initialized())
    ours = "fragility-tui" + (" (too late: CUDA already initialised)" if late else "")
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        if environ.get(name):
            # a second run in this process finds the value the first one set
            mine = (id(environ), name, environ[name]) in _ALLOCATOR_SET_HERE
            return {"variable": name, "value": environ[name], "set_by": ours if mine else "user"}
    environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    _ALLOCATOR_SET_HERE.add((id(environ), "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"))
    # In a process that already used CUDA (a Ray worker reused) the allocator is set up.
    return {"variable": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True",
            "set_by": ours}


# (environment, variable, value) configure_allocator wrote in this process
_ALLOCATOR_SET_HERE: set[tuple[int, str, str]] = set()


class LocalBackend:
    """What the backends that load weights in this process share: models prepared from
    their specs, one run-wide allocator setting."""

    overlaps_host_work = False
    engine_attention: str | None = None  # the attention an engine chooses (not probed)

    def __init__(self):
        self.info = backend_info(self.name)
        self.environ: MutableMapping[str, str] = os.environ

    def configure_process(self, environ: MutableMapping[str, str]) -> dict:
        self.environ = environ  # what depends on the device waits for it (load)
        return configure_allocator(environ)

    def prepare(self, spec, device: str) -> list:
        from runners.models.prepare import prepare_model

        prepared = [prepare_model(m, name=spec.name, dtype=spec.dtype, device=device,
                                  quantize=spec.quantize, max_new_tokens=spec.max_new_tokens,
                                  mode=spec.prompt_mode,
                                  trust_remote_code=spec.trust_remote_code,
                                  backend=self.name, engine_attention=self.engine_attention)
                    for m in spec.models]
        for p in prepared:
            p.refuse_modifiers(spec.configs)
        return prepared

    def text_encoder(self, scorer):
        return None

    def watch_stop(self, scorer, should_stop) -> None:
        """A local model's batch is not interrupted: the loop stops between batches."""

    def watch_retries(self, scorer, on_event) -> None:
        """A local model sends no requests: nothing is retried."""
