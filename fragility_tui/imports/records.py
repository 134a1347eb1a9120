"""What every log reader hands over: one run of one model under one config of another
harness (`LogRun`), its samples as the log has them (`LogSample`), nothing matched yet.

A log can hold a million samples: a sample is a slotted object whose strings are shared
with the other metrics' samples of the same log line, and its place in the log is a line
number or member name beside the run's one path string."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(slots=True)
class LogSample:
    """One scored sample as the log states it. `choices`, `target` and `pred` are in the
    order the log shows the options (which may be a shuffle of the item's)."""

    source: str  # the log file (one string shared by its samples)
    line: int | str  # line number or zip member, for messages
    sample_id: str | None  # the log's own id (often a row index: never trusted alone)
    correct: bool
    question: str | None = None
    choices: tuple[str, ...] | None = None
    target: int | None = None  # index into choices
    pred: int | None = None  # index into choices; None when the log gives none
    raw_output: str | None = None
    scores: tuple[float, ...] | None = None  # per shown option (log-likelihoods)
    # the whole item when the log carries one in our schema: (id, benchmark, subject, gold)
    doc_item: tuple | None = None
    epoch: int = 1
    item_hint: str | None = None  # an id the log carries beside its own (metadata, specific)
    prompt: str | None = None  # the prompt the log shows the model was given

    @property
    def where(self) -> str:
        sep = ":" if isinstance(self.line, int) else "#"
        return f"{self.source}{sep}{self.line}"


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
    chat: bool = False  # the harness applied the model's chat template
    # correct and pred (in the order shown) per sample when several runs share one samples
    # list (a log line scored under acc and acc_norm): the samples are matched once
    correct: list[bool] | None = None
    pred: list[int | None] | None = None

    def outcome(self, k: int) -> tuple[bool, int | None]:
        if self.correct is not None:
            return self.correct[k], self.pred[k]
        sample = self.samples[k]
        return sample.correct, sample.pred


def short_hash(*parts) -> str:
    """A 12-hex-digit hash of the parts (a template's, a chat template's)."""
    digest = hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode())
    return digest.hexdigest()[:12]


def jsonl_objects(path, key: str, kind: str):
    """(line number, object) of each non-empty line of a JSON-lines log; a line that is not
    JSON, not an object or without `key` is an error naming the file, the line and `kind`
    (what the file should be). Deeply nested lines are refused too, not a crash."""
    from fragility_tui.errors import InputError

    loads, source = json_loads(), str(path)
    with open(path, "rb") as fh:
        if fh.read(2) == b"\x1f\x8b":
            raise InputError("gzip-compressed: decompress it first (gunzip, or zcat into a "
                             ".jsonl file)", path=source)
        fh.seek(0)
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                record = loads(raw)
            except (ValueError, RecursionError) as exc:
                raise InputError(f"invalid JSON ({type(exc).__name__}: {str(exc)[:200]})",
                                 path=source, line=lineno) from None
            if not isinstance(record, dict) or key not in record:
                raise InputError(f"not {kind} line (no {key!r})", path=source, line=lineno)
            yield lineno, record


def json_loads():
    """orjson's loads where installed (3-5x faster on big logs), else json's; both raise
    ValueError on bad JSON. orjson refuses NaN and integers past 64 bits, which Python's
    json takes: a line orjson refuses is read again by json."""
    import json

    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        return json.loads

    def loads(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return json.loads(raw)

    return loads
