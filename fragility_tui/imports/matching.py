"""Log samples matched to a grid's items: by id, else by content (question and option set,
whitespace normalised); never guessed. A sample whose options are a shuffle of the item's
records the permutation it implies; one scored over more options than our four keeps the
log's own correctness and says so."""

from __future__ import annotations

from dataclasses import dataclass, field

from fragility_tui.imports.records import LogSample
from fragility_tui.items.item import Item


def normalise(text) -> str:
    return " ".join(str(text).split()).casefold()


@dataclass(slots=True)  # not frozen: a frozen init costs a setattr per field, per sample
class Match:
    sample: LogSample
    item: Item
    permutation: str | None  # display position j shows native choice int(p[j]); None = native
    shown: tuple[int, ...] | None  # native index of each shown option (-1: not the item's)
    options: int  # how many options the log scored over
    scores: tuple[float, ...] | None  # the log's per-option scores in native order

    def native(self, pred: int | None) -> int | None:
        """A prediction in the order shown, as a native index (-1: none of the item's)."""
        if pred is None or self.shown is None:
            return pred
        return self.shown[pred] if 0 <= pred < len(self.shown) else -1


@dataclass
class MatchReport:
    matched: list[Match] = field(default_factory=list)
    unmatched: list[LogSample] = field(default_factory=list)
    ambiguous: list[tuple[LogSample, list[str]]] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # sample index of each match


class ItemIndex:
    """The grid's items looked up by uid and source id, and (built on the first sample
    whose ids match nothing) by content."""

    def __init__(self, items: list[Item]):
        self.items = list(items)
        self.by_uid = {it.item_uid: it for it in items}
        self._by_source: dict[str, list[Item]] | None = None
        self._by_question: dict[str, list[Item]] | None = None
        self._by_options: dict[frozenset, list[Item]] | None = None

    def add(self, items: list[Item]) -> None:
        """More items (a streamed log's next chunk brings its own)."""
        self.items.extend(items)
        for it in items:
            self.by_uid.setdefault(it.item_uid, it)
            if self._by_source is not None:
                self._by_source.setdefault(it.source_id, []).append(it)
            if self._by_question is not None:
                self._by_question.setdefault(normalise(it.question), []).append(it)
                self._by_options.setdefault(frozenset(map(normalise, it.choices)),
                                            []).append(it)

    @property
    def by_source(self) -> dict[str, list[Item]]:
        if self._by_source is None:
            self._by_source = {}
            for it in self.items:
                self._by_source.setdefault(it.source_id, []).append(it)
        return self._by_source

    def _content(self):
        if self._by_question is None:
            self._by_question, self._by_options = {}, {}
            for it in self.items:
                self._by_question.setdefault(normalise(it.question), []).append(it)
                self._by_options.setdefault(frozenset(map(normalise, it.choices)),
                                            []).append(it)
        return self._by_question, self._by_options

    def match(self, sample: LogSample) -> tuple[Item | None, list[str]]:
        """(item, []) when one item fits; (None, candidates) when several do."""
        for key in (sample.item_hint, sample.doc_item[0] if sample.doc_item else None):
            found = self._by_id(key, sample)
            if found is not None:
                return found, []
        return self._by_content(sample)

    def _by_id(self, key, sample: LogSample) -> Item | None:
        if key is None:
            return None
        key = str(key)
        found = self.by_uid.get(key)
        if found is not None:
            return found
        if sample.doc_item and sample.doc_item[1]:  # our schema's id: benchmark/id
            found = self.by_uid.get(f"{sample.doc_item[1]}/{key}")
            if found is not None:
                return found
        if key.isdigit():  # a row index or a counter (lm-eval's, Inspect's default ids):
            return None    # naming an item by it would be a guess
        found = self.by_source.get(key, [])
        bench = sample.doc_item[1] if sample.doc_item else None
        found = [it for it in found if bench is None or it.benchmark == bench] or found
        return found[0] if len(found) == 1 else None

    def _by_content(self, sample: LogSample):
        if not sample.choices:
            return None, []
        by_question, by_options = self._content()
        options = frozenset(map(normalise, sample.choices))
        candidates = list(by_options.get(options, []))
        if not candidates:  # the log scored more options than our four-option assembly kept
            candidates = [it for it in by_question.get(normalise(sample.question or ""), [])
                          if set(map(normalise, it.choices)) <= options]
        if len(candidates) > 1 and sample.question is not None:
            question = normalise(sample.question)
            narrowed = [it for it in candidates if normalise(it.question) == question
                        or (it.question and normalise(it.question) in question)]
            candidates = narrowed or candidates
        if len(candidates) == 1:
            return candidates[0], []
        return None, [it.item_uid for it in candidates]


def match_samples(samples: list[LogSample], items: list[Item] | ItemIndex) -> MatchReport:
    """Every sample matched or reported; `positions` keeps each match's sample index."""
    index = items if isinstance(items, ItemIndex) else ItemIndex(items)
    report = MatchReport()
    for k, sample in enumerate(samples):
        item, candidates = index.match(sample)
        if item is None:
            (report.ambiguous.append((sample, candidates)) if candidates
             else report.unmatched.append(sample))
            continue
        report.matched.append(placed(sample, item))
        report.positions.append(k)
    return report


def placed(sample: LogSample, item: Item) -> Match:
    """The sample's prediction and scores in the item's native order, and the order it
    showed (the common case, the item's own options in its own order, costs nothing)."""
    choices = sample.choices
    if not choices or choices == item.choices:
        n = len(choices) if choices else len(item.choices)
        return Match(sample, item, None, None, n,
                     sample.scores if choices and sample.scores
                     and len(sample.scores) == n else None)
    native = {normalise(c): k for k, c in enumerate(item.choices)}
    shown = [native.get(normalise(c), -1) for c in choices]
    n = len(item.choices)
    same_set = len(shown) == n and sorted(shown) == list(range(n))
    permutation = "".join(map(str, shown)) if same_set and shown != sorted(shown) else None
    scores = None
    if same_set and sample.scores and len(sample.scores) == n:
        scores = tuple(sample.scores[shown.index(k)] for k in range(n))
    return Match(sample, item, permutation, tuple(shown), len(choices), scores)
