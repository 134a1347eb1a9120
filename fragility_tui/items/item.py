"""Items (SPEC §1): the Item record, four-option assembly, seeded sampling, load reports.

Loaders for each on-disk format live in `items/loaders.py`; they all produce `RawItem`s that
`assemble()` turns into four-option `Item`s, counting every exclusion in a `LoadReport`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field

N_OPTIONS = 4  # SPEC §1: every item is assembled to four options
DEFAULT_PER_BENCHMARK = 1000
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Item:
    """A four-option item as every config sees it (choices in native order)."""

    item_uid: str  # "benchmark/source_id", stable
    benchmark: str
    subject: str | None
    question: str
    choices: tuple[str, ...]
    gold: int  # 0-based index into choices

    @property
    def source_id(self) -> str:
        return self.item_uid.split("/", 1)[1]

    def to_json(self) -> dict:
        return {"id": self.source_id, "benchmark": self.benchmark, "subject": self.subject,
                "question": self.question, "choices": list(self.choices), "gold": self.gold}


@dataclass(frozen=True)
class RawItem:
    """An item as read from a file, before four-option assembly."""

    source_id: str
    benchmark: str
    subject: str | None
    question: str
    choices: tuple[str, ...]
    gold: int
    where: str = ""  # "path:line" for error messages


@dataclass
class LoadReport:
    """What a load kept and excluded, per reason (SPEC §1)."""

    source: str
    read: int = 0
    kept: int = 0
    excluded: Counter = field(default_factory=Counter)
    per_benchmark: Counter = field(default_factory=Counter)
    trimmed: int = 0  # kept items that had more than 4 choices (cut to gold + 3 distractors)
    selected: int | None = None  # items left after seeded sampling; None = no sampling
    files: list[str] = field(default_factory=list)  # a folder's files, "name (split)"
    warnings: list[str] = field(default_factory=list)  # said on stderr, kept in the run card

    def exclude(self, reason: str) -> None:
        self.excluded[reason] += 1

    def merge(self, other: "LoadReport") -> "LoadReport":
        merged = LoadReport(f"{self.source}; {other.source}", self.read + other.read,
                            self.kept + other.kept)
        merged.excluded = self.excluded + other.excluded
        merged.per_benchmark = self.per_benchmark + other.per_benchmark
        merged.trimmed = self.trimmed + other.trimmed
        if self.selected is not None and other.selected is not None:
            merged.selected = self.selected + other.selected
        merged.files = self.files + other.files
        merged.warnings = self.warnings + other.warnings
        return merged

    def to_dict(self) -> dict:
        return {"source": self.source, "read": self.read, "kept": self.kept,
                "excluded": dict(sorted(self.excluded.items())),
                "per_benchmark": dict(sorted(self.per_benchmark.items())),
                "trimmed": self.trimmed, "selected": self.selected,
                **({"files": list(self.files)} if self.files else {}),
                **({"warnings": list(self.warnings)} if self.warnings else {})}

    def summary(self) -> str:
        parts = [f"{self.kept} kept of {self.read} read"]
        parts += [f"{n} excluded ({reason})" for reason, n in sorted(self.excluded.items())]
        if self.trimmed:
            parts.append(f"{self.trimmed} trimmed to 4 options")
        if self.selected is not None:
            parts.append(f"{self.selected} sampled")
        return ", ".join(parts)


def assemble(raw: RawItem) -> Item | None:
    """Four-option assembly: None when fewer than 4 choices; with more, the gold plus the
    first three distractors, in native order (TruthfulQA mc1 keeps its gold first)."""
    if len(raw.choices) < N_OPTIONS:
        return None
    if not 0 <= raw.gold < len(raw.choices):
        raise ValueError(f"gold {raw.gold} is not an index of the {len(raw.choices)} choices")
    if len(raw.choices) == N_OPTIONS:  # the common case, kept cheap (a million-item log)
        return Item(f"{raw.benchmark}/{raw.source_id}", raw.benchmark, raw.subject,
                    raw.question, tuple(raw.choices), raw.gold)
    else:
        distractors = [i for i in range(len(raw.choices)) if i != raw.gold][: N_OPTIONS - 1]
        keep = sorted(distractors + [raw.gold])
    choices = tuple(raw.choices[i] for i in keep)
    return Item(f"{raw.benchmark}/{raw.source_id}", raw.benchmark, raw.subject, raw.question,
                choices, keep.index(raw.gold))


def exclusion_reason(item: Item | None) -> str | None:
    """Why an item is left out of a grid (None = kept). Documented in docs/items.md."""
    if item is None:
        return "fewer than 4 choices"
    if any(not choice.strip() for choice in item.choices):
        # an empty option cannot be shown as a choice, and its length-normalised cloze
        # score (SPEC §2, divided by 0 characters) is undefined
        return "empty option text"
    return None


def assemble_all(raws: list[RawItem], report: LoadReport) -> list[Item]:
    """Assemble every raw item, counting exclusions and trims in `report` (not `read`)."""
    items = []
    for raw in raws:
        item = assemble(raw)
        reason = exclusion_reason(item)
        if reason is not None:
            report.exclude(reason)
            continue
        items.append(item)
        report.kept += 1
        report.per_benchmark[item.benchmark] += 1
        if len(raw.choices) > N_OPTIONS:
            report.trimmed += 1
    return items


def _draw_key(seed: int, item_uid: str) -> bytes:
    return hashlib.sha256(f"{seed}\x1f{item_uid}".encode()).digest()


def sample(items: list[Item], per_benchmark: int | None = DEFAULT_PER_BENCHMARK,
           seed: int = DEFAULT_SEED) -> list[Item]:
    """Up to `per_benchmark` items per benchmark, without replacement, seeded.

    The draw ranks a benchmark's items by sha256(seed, item_uid) and keeps the first N, so a
    seed gives the same sample on every machine and Python version. The result keeps the
    input (file) order. `per_benchmark=None` keeps everything.
    """
    if per_benchmark is None:
        return list(items)
    chosen: set[str] = set()
    by_benchmark: dict[str, list[Item]] = {}
    for item in items:
        by_benchmark.setdefault(item.benchmark, []).append(item)
    for group in by_benchmark.values():
        ranked = sorted(group, key=lambda it: _draw_key(seed, it.item_uid))
        chosen.update(it.item_uid for it in ranked[:per_benchmark])
    return [it for it in items if it.item_uid in chosen]


def item_set_hash(items: list[Item]) -> str:
    """sha256 over the items' content in order (ids, text, choices, gold)."""
    h = hashlib.sha256()
    for it in items:
        h.update(json.dumps([it.item_uid, it.benchmark, it.subject, it.question,
                             list(it.choices), it.gold], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def item_content_hash(question: str, choices: list[str] | tuple[str, ...]) -> str:
    """Hash of an item's text alone (used to match items across tools, e.g. lm-eval logs)."""
    return hashlib.sha256(json.dumps([question, list(choices)], ensure_ascii=False).encode()).hexdigest()


def shard_of(item_uid: str, shards: int) -> int:
    """The shard (0 … shards-1) an item belongs to: a stable hash of its id, the same on every
    machine and Python, so `run --shard i/n` workers split the items without talking."""
    return int(hashlib.sha256(item_uid.encode()).hexdigest()[:16], 16) % shards


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` (0 <= I < N) -> (I, N); ValueError with the rule otherwise."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise ValueError(f"{text!r} is not I/N (e.g. 0/4)") from None
    if not sep or n < 1 or not 0 <= i < n:
        raise ValueError(f"{text!r}: need 0 <= I < N, e.g. 0/4 … 3/4")
    return i, n

