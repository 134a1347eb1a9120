"""A model spec resolved to its files (models.py resolves local specs, hub.py hub ids)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ResolvedSpec:
    """Where a model spec's weights are, before loading anything heavy."""

    spec: str
    name: str  # the model's name in the grid (before any +int4 suffix)
    kind: str  # gguf | folder | hub
    path: Path  # the .gguf file or the folder
    source: str  # what provenance shows as the source
    revision: str | None = None  # resolved commit sha (hub only)
    download_bytes: int | None = None  # what the hub download takes (hub only, when listed)
