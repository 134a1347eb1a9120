"""Provenance records (SPEC §10) the runner writes: per model (with its fingerprint), per
run, and per session (one process's share of a run: a resumed run appends one, never
rewriting the ones before). Nothing here holds an absolute machine path."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess

from fragility_tui import __version__
from fragility_tui.store.schema import utc_now


def library_versions() -> dict:
    versions = {}
    for dist in ("torch", "transformers", "optimum", "optimum-quanto", "tokenizers", "gguf",
                 "accelerate", "vllm"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def code_revision() -> str | None:
    """The checkout's commit (+ "-dirty" with uncommitted changes) the runner ran from, so
    a grid records which scorer made it; None outside a git checkout."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _device_map(model) -> dict | None:
    """Where the layers went when a model was sharded across GPUs (None: one device)."""
    mapping = getattr(model, "hf_device_map", None)
    if not mapping or len(set(mapping.values())) <= 1:
        return None
    return {name: str(where) for name, where in mapping.items()}


def model_provenance(prepared, loaded, scheme: dict | None) -> dict:
    """The per-model record (run provenance `models.<name>` and the model row)."""
    resolved = prepared.resolved
    template = loaded.tokenizer.chat_template
    gguf = None
    if resolved.kind == "gguf":
        gguf = {"file": resolved.path.name, "quant_type": prepared.gguf_quant,
                "compute": f"de-quantised to {loaded.dtype} for compute (transformers GGUF "
                           "loader): the weights' values are the GGUF's, the arithmetic is "
                           f"{loaded.dtype}"}
    return {
        # a local path is not carried: the source names the file or folder, the hash the bytes
        "spec": resolved.spec if resolved.kind == "hub" or resolved.source.startswith("alias:")
        else resolved.path.name,
        "source": resolved.source,
        "kind": resolved.kind,
        "revision": resolved.revision,
        "hub_download_bytes": resolved.download_bytes,  # config, tokenizer, weights only
        "weights_sha256": prepared.weights_sha256,
        "gguf": gguf,
        "dtype": loaded.dtype,
        "quantization": scheme,
        "base_model": loaded.base_model,
        "tokenizer_sha256": _tokenizer_sha(loaded.tokenizer),
        "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()
        if isinstance(template, str) else None,
        # the text and special tokens too, so the app can show the exact rendering a cell's
        # model saw without transformers (fragility_tui/harness/chat.py)
        "chat_template": template if isinstance(template, str) else None,
        "chat_template_tokens": _special_tokens(loaded.tokenizer),
        "prompt_mode": "chat template" if prepared.prompt_mode == "chat" else "raw prompt",
        "template_args": prepared.template_args,
        "add_bos": loaded.add_bos,
        "eos_ids": sorted(loaded.eos_ids),
        "device": loaded.device,
        "device_map": _device_map(loaded.model),
        "attn_implementation": getattr(getattr(loaded.model, "config", None),
                                       "_attn_implementation", None),
        "sdpa_kernels": _sdpa_kernels(loaded.device),
        "backend": {"name": "transformers",
                    "version": library_versions().get("transformers")},
        "libraries": library_versions(),
        "fingerprint": prepared.fingerprint,
    }


def _sdpa_kernels(device: str) -> list[str] | None:
    """The SDPA kernels torch may pick on CUDA (configure_device leaves cuDNN's out)."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    flags = {"flash": torch.backends.cuda.flash_sdp_enabled,
             "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled,
             "cudnn": torch.backends.cuda.cudnn_sdp_enabled,
             "math": torch.backends.cuda.math_sdp_enabled}
    return [name for name, enabled in flags.items() if enabled()]


def _special_tokens(tokenizer) -> dict:
    """What apply_chat_template passes a template besides the messages (bos_token, ...)."""
    tokens = getattr(tokenizer, "special_tokens_map", None) or {}
    return {k: (v if isinstance(v, (str, list)) else str(v)) for k, v in tokens.items()}


def _tokenizer_sha(tokenizer) -> str:
    from runners.models.fingerprint import tokenizer_hash

    return tokenizer_hash(tokenizer)


def gpu_info(device: str) -> dict | None:
    """What a CUDA run ran on: device name, count, compute capability, CUDA and driver
    versions (None on a CPU)."""
    if not device.startswith("cuda"):
        return None
    import torch

    index = torch.device(device).index or 0
    major, minor = torch.cuda.get_device_capability(index)
    return {"name": torch.cuda.get_device_name(index), "count": torch.cuda.device_count(),
            "index": index, "capability": f"{major}.{minor}", "cuda": torch.version.cuda,
            "driver": _driver_version()}


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None


def new_session(resumed: bool) -> dict:
    """This process's session record, opened at its start."""
    return {"started_at": utc_now().isoformat(), "ended_at": None, "resumed": resumed,
            "host": platform.node(), "python": platform.python_version(),
            "libraries": library_versions(),
            "fragility_tui": {"version": __version__, "git": code_revision()},
            "device": None, "gpu": None, "cells_written": 0, "status": "running"}


def portable_source(source: str) -> str:
    """A source as provenance shows it: a local file or folder by its name (its content is
    identified by a hash next to it), a named source as given."""
    if os.path.isabs(source) or os.path.exists(source):
        return os.path.basename(os.path.normpath(source)) or source
    return source


def run_provenance(spec, items, set_hash: str, report, previous: dict,
                   scoring_text: dict) -> dict:
    """The run-level record, rebuilt at each session start (sessions are kept apart);
    `scoring_text` is the backend's account of how it pads, decodes and scores."""
    from fragility_tui import SPEC_VERSION
    from fragility_tui.harness.config_axes import axes_summary
    from fragility_tui.harness.parser import PARSER_VERSION
    from fragility_tui.harness.render import PROMPT_VERSION
    from fragility_tui.schemas.provenance import PROVENANCE_SCHEMA

    return {
        "schema": PROVENANCE_SCHEMA,  # how fragility_tui/schemas/provenance.py reads it
        "spec_version": SPEC_VERSION, "parser_version": PARSER_VERSION,
        "prompt_version": PROMPT_VERSION, "max_new_tokens": spec.max_new_tokens,
        "seed": spec.seed, "item_set_hash": set_hash, "items": len(items),
        "per_benchmark": spec.per_benchmark,
        "item_sources": [portable_source(s) for s in spec.items],
        "load_report": _portable_report(report.to_dict()), "configs": spec.configs,
        "config_axes": axes_summary(spec.configs),
        "batch_size": spec.batch_size or "auto",
        "batch_tokens": spec.batch_tokens or "auto", "threads": spec.threads,
        "prefix_reuse": spec.prefix_reuse, "overlap": spec.overlap,
        "prompt_mode": spec.prompt_mode,
        "backend": spec.backend,
        **scoring_text,
        "host": platform.node(), "python": platform.python_version(),
        "fragility_tui": {"version": __version__, "git": code_revision()},
        "libraries": library_versions(),
        "started_at": previous.get("started_at") or utc_now().isoformat(),
        "models": dict(previous.get("models") or {}),
    }


def _portable_report(report: dict) -> dict:
    if isinstance(report.get("source"), str):
        report["source"] = ", ".join(portable_source(s) for s in report["source"].split(", "))
    return report
