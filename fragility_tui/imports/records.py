"""What every log reader hands over: one run of one model under one config of another
harness (`LogRun`), its samples as the log has them (`LogSample`), nothing matched yet."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LogSample:
    """One scored sample as the log states it. `choices`, `target` and `pred` are in the
    order the log shows the options (which may be a shuffle of the item's)."""

    where: str  # file:line or file#member, for messages
    sample_id: str | None  # the log's own id (often a row index: never trusted alone)
    correct: bool
    question: str | None = None
    choices: tuple[str, ...] | None = None
    target: int | None = None  # index into choices
    pred: int | None = None  # index into choices; None when the log gives none
    raw_output: str | None = None
    scores: tuple[float, ...] | None = None  # per shown option (log-likelihoods)
    doc: dict | None = None  # the whole doc, when the log carries one
    epoch: int = 1
    item_hint: str | None = None  # an id the log carries beside its own (metadata, specific)
    prompt: str | None = None  # the prompt the log shows the model was given


@dataclass
class LogRun:
    """One (model, config) of a log: the config's id parts and axes, its samples, and the
    log's own aggregate accuracy (the import must reproduce it)."""

    harness: str
    task: str
    metric: str
    shots: int | None
    axes: dict[str, str]
    model: str | None
    source: str
    samples: list[LogSample] = field(default_factory=list)
    reported_accuracy: float | None = None
    provenance: dict = field(default_factory=dict)
    epochs: int = 1
    chat: bool = False  # the harness applied the model's chat template


def short_hash(*parts) -> str:
    """A 12-hex-digit hash of the parts (a template's, a chat template's)."""
    digest = hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode())
    return digest.hexdigest()[:12]
