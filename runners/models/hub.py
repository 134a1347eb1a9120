"""Hub models: download only what a run reads, and know its size before downloading."""

from __future__ import annotations

import shutil
from pathlib import Path

from fragility_tui.errors import InputError
from runners.models.resolved import ResolvedSpec


# What a run needs from a hub repository: everything else (original/*.pth checkpoints,
# .bin copies beside .safetensors, ONNX or GGUF exports) is never read, so never fetched.
HUB_CONFIG_FILES = frozenset({
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json", "tokenizer.model", "vocab.json",
    "merges.txt", "chat_template.jinja", "chat_template.json"})
# When the hub cannot list the repository (offline: the local cache answers).
HUB_FALLBACK_PATTERNS = sorted(HUB_CONFIG_FILES) + ["*.safetensors", "model.safetensors.index.json"]


def hub_files(names) -> list[str]:
    """The files of a repository listing worth downloading: config, tokenizer, generation
    config and the top-level *.safetensors (with their index); *.bin only when there is no
    safetensors."""
    top = [n for n in names if "/" not in n]
    configs = [n for n in top if n in HUB_CONFIG_FILES]
    weights = [n for n in top if n.endswith(".safetensors") or n == "model.safetensors.index.json"]
    if not any(n.endswith(".safetensors") for n in weights):
        weights = [n for n in top if (n.endswith(".bin") and n.startswith("pytorch_model"))
                   or n == "pytorch_model.bin.index.json"]
    return sorted(configs + weights)


def hub_download_bytes(sizes: dict[str, int | None]) -> int:
    """Bytes a hub download takes: the sizes of `hub_files` of the listing only."""
    return sum(sizes.get(name) or 0 for name in hub_files(sizes))


def _hub_listing(repo: str, revision: str | None) -> dict[str, int | None] | None:
    """{file: size} of the repository at `revision`; None when the hub cannot be reached
    (a missing repository or revision is raised)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = HfApi().model_info(repo, revision=revision or None, files_metadata=True)
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise
    except Exception:  # offline or unreachable: the local cache may still answer
        return None
    return {s.rfilename: s.size for s in info.siblings or []}


def _check_hub_disk(spec: str, need: int | None) -> None:
    """Refuse before downloading what the hub cache's disk cannot hold."""
    from huggingface_hub import constants

    cache = Path(constants.HF_HUB_CACHE)
    while not cache.exists() and cache != cache.parent:
        cache = cache.parent
    free = shutil.disk_usage(cache).free
    if need is not None and need > free:
        raise InputError(f"{spec} needs {need / 2**30:.1f} GiB of downloads (config, tokenizer "
                         f"and weights) but {cache} has {free / 2**30:.1f} GiB free",
                         field="--model")


def resolve_hub(spec: str) -> ResolvedSpec:
    repo, _, revision = spec.partition("@")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (LocalEntryNotFoundError, RepositoryNotFoundError,
                                            RevisionNotFoundError)
    except ImportError:  # pragma: no cover - huggingface_hub is a core dependency
        raise InputError("hub ids need huggingface_hub: pip install huggingface_hub")
    try:
        listing = _hub_listing(repo, revision)
        patterns = hub_files(listing) if listing is not None else HUB_FALLBACK_PATTERNS
        need = hub_download_bytes(listing) if listing is not None else None
        _check_hub_disk(spec, need)
        # Hub unreachable (offline): ask the local cache only. huggingface_hub 1.33 given a
        # commit sha skips its own offline fallback and lists the repository online.
        folder = Path(snapshot_download(repo, revision=revision or None,
                                        allow_patterns=patterns,
                                        local_files_only=listing is None))
    except InputError:
        raise
    except RevisionNotFoundError:
        raise InputError(f"revision {revision!r} not found for {repo}", field="--model")
    except RepositoryNotFoundError:
        raise InputError(f"no model {repo!r} on the hub (or it is private)", field="--model")
    except LocalEntryNotFoundError:
        raise InputError(f"cannot reach the hub for {spec} and it is not in the local hub "
                         "cache (offline?); use a local folder, a .gguf file or an alias",
                         field="--model")
    except Exception as exc:  # network errors come in many types
        raise InputError(f"cannot fetch {spec} from the hub: {exc}", field="--model")
    sha = folder.name  # snapshot folders are named by the resolved commit sha
    return ResolvedSpec(spec, spec.split("@")[0], "hub", folder, f"hub:{repo}", revision=sha,
                        download_bytes=need)
