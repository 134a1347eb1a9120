"""Log samples matched to a grid's items: by id, else by content (question and option set,
whitespace normalised); never guessed. A sample whose options are a shuffle of the item's
records the permutation it implies; one scored over more options than our four keeps the
log's own correctness and says so."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fragility_tui.imports.records import LogSample
from fragility_tui.items.item import Item


def normalise(text) -> str:
    return re.sub(r"\s+", " ", str(text)).strip().casefold()


@dataclass(frozen=True)
class Match:
    sample: LogSample
    item: Item
    permutation: str | None  # display position j shows native choice int(p[j]); None = native
    pred: int | None  # native index; -1 when the log's answer is none of the item's options
    options: int  # how many options the log scored over


@dataclass
class MatchReport:
    matched: list[Match] = field(default_factory=list)
    unmatched: list[LogSample] = field(default_factory=list)
    ambiguous: list[tuple[LogSample, list[str]]] = field(default_factory=list)

    def summary(self) -> str:
        text = (f"{len(self.matched)} matched, {len(self.unmatched)} unmatched, "
                f"{len(self.ambiguous)} ambiguous")
        if self.unmatched:
            text += "; first unmatched: " + ", ".join(
                f"{s.where} (id {s.sample_id!r})" for s in self.unmatched[:3])
        if self.ambiguous:
            text += "; first ambiguous: " + ", ".join(
                f"{s.where} ({' or '.join(uids[:3])})" for s, uids in self.ambiguous[:3])
        return text


class ItemIndex:
    """The grid's items looked up by uid, by source id and by content."""

    def __init__(self, items: list[Item]):
        self.by_uid = {it.item_uid: it for it in items}
        self.by_source: dict[str, list[Item]] = {}
        self.by_question: dict[str, list[Item]] = {}
        self.by_options: dict[frozenset, list[Item]] = {}
        for it in items:
            self.by_source.setdefault(it.source_id, []).append(it)
            self.by_question.setdefault(normalise(it.question), []).append(it)
            self.by_options.setdefault(frozenset(map(normalise, it.choices)), []).append(it)

    def match(self, sample: LogSample) -> tuple[Item | None, list[str]]:
        """(item, []) when one item fits; (None, candidates) when several do."""
        for key in (sample.item_hint, _doc_id(sample.doc)):
            found = self._by_id(key, sample)
            if found is not None:
                return found, []
        return self._by_content(sample)

    def _by_id(self, key, sample: LogSample) -> Item | None:
        if key is None:
            return None
        key = str(key)
        if key in self.by_uid:
            return self.by_uid[key]
        found = self.by_source.get(key, [])
        bench = (sample.doc or {}).get("benchmark") if isinstance(sample.doc, dict) else None
        found = [it for it in found if bench is None or it.benchmark == bench] or found
        return found[0] if len(found) == 1 else None

    def _by_content(self, sample: LogSample):
        if not sample.choices:
            return None, []
        options = frozenset(map(normalise, sample.choices))
        candidates = list(self.by_options.get(options, []))
        if not candidates:  # the log scored more options than our four-option assembly kept
            candidates = [it for it in self.by_question.get(normalise(sample.question or ""), [])
                          if set(map(normalise, it.choices)) <= options]
        if len(candidates) > 1 and sample.question is not None:
            question = normalise(sample.question)
            narrowed = [it for it in candidates if normalise(it.question) == question
                        or (it.question and normalise(it.question) in question)]
            candidates = narrowed or candidates
        if len(candidates) == 1:
            return candidates[0], []
        return None, [it.item_uid for it in candidates]


def _doc_id(doc) -> str | None:
    if isinstance(doc, dict) and doc.get("id") is not None:
        return str(doc["id"])
    return None


def match_samples(samples: list[LogSample], items: list[Item]) -> MatchReport:
    index = ItemIndex(items)
    report = MatchReport()
    for sample in samples:
        item, candidates = index.match(sample)
        if item is None:
            (report.ambiguous.append((sample, candidates)) if candidates
             else report.unmatched.append(sample))
            continue
        report.matched.append(_placed(sample, item))
    return report


def _placed(sample: LogSample, item: Item) -> Match:
    """The sample's prediction in the item's native order, and the order it showed."""
    if not sample.choices:
        return Match(sample, item, None, sample.pred if sample.pred is not None else None,
                     len(item.choices))
    native = {normalise(c): k for k, c in enumerate(item.choices)}
    shown = [native.get(normalise(c), -1) for c in sample.choices]
    permutation = None
    if len(shown) == len(item.choices) and sorted(shown) == list(range(len(item.choices))) \
            and shown != sorted(shown):
        permutation = "".join(map(str, shown))
    pred = None
    if sample.pred is not None:
        pred = shown[sample.pred] if 0 <= sample.pred < len(shown) else -1
    return Match(sample, item, permutation, pred, len(sample.choices))
