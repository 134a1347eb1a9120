"""From paths to planned cells: detect each path's format, stream its runs a chunk at a
time, match samples to items, make one cell per (model, item, config). Pure: the store
writes the chunks in one transaction (store/log_import.py, LogWriter)."""

from __future__ import annotations

import gc
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.harness.config_axes import imported_config_id
from fragility_tui.imports import reader, readers
from fragility_tui.imports.matching import ItemIndex, MatchReport, match_samples
from fragility_tui.imports.records import LogRun, LogSample
from fragility_tui.imports.worker import read_chunks_in_process, worth_a_process
from fragility_tui.items.item import Item, RawItem, assemble
from fragility_tui.text import capped

CELL_FIELDS = ("item_uid", "correct", "pred", "permutation", "raw_output", "scores", "prompt")


@dataclass
class ConfigImport:
    """One (model, config) of a log, over every chunk it was read in: what the summary
    says (matched, unmatched and ambiguous samples with the first few of each, the
    accuracy of the cells against the log's own) and the items it has scored."""

    run: LogRun  # the first chunk's: harness, source, the log's own accuracy, provenance
    config_id: str
    model: str
    axes: dict
    n_cells: int = 0
    n_correct: int = 0
    matched: int = 0
    unmatched: int = 0
    ambiguous: int = 0
    examples: list[str] = field(default_factory=list)  # the first few unmatched / ambiguous
    wider: int = 0  # samples scored over more options than the item's four
    seen: dict[str, int | str] = field(default_factory=dict)  # item -> the log line scoring it

    @property
    def accuracy(self) -> float | None:
        return self.n_correct / self.n_cells if self.n_cells else None

    @property
    def reproduces_log(self) -> bool:
        theirs = self.run.reported_accuracy
        return theirs is not None and self.accuracy is not None and \
            abs(self.accuracy - theirs) < 5e-7

    def summary(self) -> str:
        text = (f"{self.matched} matched, {self.unmatched} unmatched, "
                f"{self.ambiguous} ambiguous")
        return text + ("; first: " + ", ".join(self.examples) if self.examples else "")

    def reproduces(self) -> str:
        """The line that says whether the cells give the log's own accuracy."""
        ours, theirs = self.accuracy, self.run.reported_accuracy
        if theirs is None:
            return f"accuracy {ours:.3f} (the log states none to compare)"
        if self.reproduces_log:
            return f"reproduces the log's accuracy {theirs:.3f}"
        return (f"accuracy {ours:.3f} over the imported cells; the log's own is {theirs:.3f} "
                f"({self.unmatched + self.ambiguous} samples not matched to an item)")

    def add(self, report: MatchReport) -> None:
        self.matched += len(report.matched)
        self.unmatched += len(report.unmatched)
        self.ambiguous += len(report.ambiguous)
        for s in report.unmatched[:3 - len(self.examples)]:
            self.examples.append(f"{s.where} (id {s.sample_id!r}) unmatched")
        for s, uids in report.ambiguous[:3 - len(self.examples)]:
            self.examples.append(f"{s.where} ambiguous: {' or '.join(uids[:3])}")


@dataclass
class PlannedChunk:
    """The cells of one chunk of one (model, config), as columns (no object per cell)."""

    config: ConfigImport
    columns: dict[str, list] = field(default_factory=lambda: {k: [] for k in CELL_FIELDS})

    @property
    def n_cells(self) -> int:
        return len(self.columns["item_uid"])


def detect(path: Path):
    """The reader of a log file (or of a HELM run directory): the first whose sniff
    accepts it."""
    if not path.exists():
        raise InputError("no such file or folder", path=str(path))
    for module in readers():
        if module.sniff(path):
            return module
    raise _not_a_log(path)


def _not_a_log(path: Path) -> InputError:
    return InputError("not a log this version reads (lm-eval samples_*.jsonl, an Inspect "
                      ".eval or its JSON, a lighteval details parquet, Every Eval Ever "
                      "JSONL, a HELM run directory with per_instance_stats.json); name the "
                      "format with --format", path=str(path))


def log_files(path: Path, fmt: str | None = None) -> list[tuple[object, Path]]:
    """(reader, file) for every log under a path. A folder may hold several harnesses'
    logs: each file goes to the first reader that recognises it, so none is skipped
    because another format was found first; with --format, only that format's."""
    if not path.exists():
        raise InputError("no such file or folder", path=str(path))
    if fmt:
        try:
            module = reader(fmt)
        except KeyError as exc:
            raise InputError(str(exc.args[0]), field="--format") from None
        found = [(module, p) for p in module.expand(path) if not path.is_dir() or module.sniff(p)]
        if not found:
            raise InputError(f"no {module.NAME} logs here", path=str(path))
        return found
    if not path.is_dir() or reader("helm").sniff(path):  # a file, or one HELM run
        module = detect(path)
        return [(module, p) for p in module.expand(path)]
    found, claimed = [], set()
    for module in readers():
        for p in module.expand(path):
            if p not in claimed and module.sniff(p):
                claimed.add(p)
                found.append((module, p))
    if not found:
        raise _not_a_log(path)
    return found


def stream_runs(paths, fmt: str | None = None, *, model: str | None = None,
                metric: str | None = None, size: int | None = None):
    """The runs of every log under the paths, a chunk at a time (a reader with
    `read_chunks` streams a big file, parsed in a second process where that pays:
    imports/worker.py; the others give a file's runs whole)."""
    seen = set()  # a file named twice (a folder and a file in it) is read once
    for raw in paths:
        for module, file in log_files(Path(raw), fmt):
            if file.resolve() in seen:
                continue
            seen.add(file.resolve())
            try:
                if hasattr(module, "read_chunks"):
                    kwargs = {"model": model, "metric": metric,
                              "size": module.CHUNK if size is None else size}
                    yield from (read_chunks_in_process(module.__name__, file, **kwargs)
                                if worth_a_process(file) else module.read_chunks(file, **kwargs))
                else:
                    yield module.read(file, model=model, metric=metric)
            except zipfile.BadZipFile as exc:
                raise InputError(f"not a readable zip ({exc}): a truncated or damaged "
                                 "log", path=str(file)) from None


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector off while a log goes in: a million samples, items
    and matches are live at once, none in a cycle, and the collector's repeated passes over
    them cost a quarter of a big import (measured: benchmarks/bench_import_log.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def items_from_logs(runs: list[LogRun]) -> list[Item]:
    """Items the logs carry whole (question, choices, gold): a doc in our item schema, else
    the sample's own question, options and target. A sample without them adds none."""
    items: dict[str, Item] = {}
    lists = {id(run.samples): (run, run.samples) for run in runs}  # runs share a line's
    seen: set = set()
    for run, samples in lists.values():
        for s in samples:
            key = s.doc_item[:2] if s.doc_item else (s.item_hint, s.sample_id)  # id, benchmark
            if key in seen:
                continue
            seen.add(key)
            raw = _raw_item(run, s)
            item = assemble(raw) if raw is not None else None
            if item is not None and item.item_uid not in items:
                items[item.item_uid] = item
    return list(items.values())


def _raw_item(run: LogRun, s: LogSample):
    if s.doc_item is not None and s.question is not None and s.choices:
        source_id, benchmark, subject, gold = s.doc_item
        if isinstance(gold, int) and not isinstance(gold, bool) and 0 <= gold < len(s.choices):
            return RawItem(source_id, benchmark or run.task, subject, s.question,
                           s.choices, gold)
    if s.question is None or not s.choices or s.target is None or s.epoch != 1:
        return None
    if not 0 <= s.target < len(s.choices):
        return None
    uid = s.item_hint or s.sample_id
    if uid is None:
        return None
    benchmark, _, source = str(uid).rpartition("/")
    return RawItem(source, benchmark or run.task, None, s.question, s.choices, s.target)


class Planner:
    """Matches runs, a chunk at a time, to the items and makes their cells; keeps each
    (model, config)'s summary across chunks and files."""

    def __init__(self, items: list[Item], model: str | None = None):
        self.index = ItemIndex(items)
        self.model = model
        self.configs: dict[tuple[str, str], ConfigImport] = {}

    def plan(self, runs: list[LogRun]) -> list[PlannedChunk]:
        """The chunk's cells; epochs of one sample become replicate configs (+eN). Raises
        when an item is scored twice under one config, or two logs give the same
        (model, config)."""
        matched: dict[int, MatchReport] = {}
        out = []
        for run in runs:
            epochs = sorted({s.epoch for s in run.samples})
            for epoch in epochs:
                if len(epochs) == 1:
                    if id(run.samples) not in matched:
                        matched[id(run.samples)] = match_samples(run.samples, self.index)
                    report, keep = matched[id(run.samples)], None
                else:
                    keep = [k for k, s in enumerate(run.samples) if s.epoch == epoch]
                    report = match_samples([run.samples[k] for k in keep], self.index)
                out.append(self._chunk(run, report, keep, epoch if len(epochs) > 1 else None))
        return out

    def finish(self) -> list[ConfigImport]:
        """Every (model, config) imported; a config none of whose samples matched is an
        error (the whole import is refused)."""
        for c in self.configs.values():
            if not c.matched:
                raise InputError(f"no sample of {c.config_id} matches an item of the grid "
                                 f"({c.summary()}); pass --items with the task's item file",
                                 path=c.run.source)
        return list(self.configs.values())

    def _config(self, run: LogRun, epoch) -> ConfigImport:
        name = self.model or run.model
        if not name:
            raise InputError("the log does not name its model: give --model", path=run.source)
        config_id = imported_config_id(run.harness, run.task, run.metric, run.shots, epoch,
                                       run.chat)
        known = self.configs.get((name, config_id))
        if known is None:
            header = replace(run, samples=[], correct=None, pred=None)  # not its samples
            known = self.configs[(name, config_id)] = ConfigImport(header, config_id, name,
                                                                   dict(run.axes))
        elif known.run.source != run.source:
            raise InputError(f"two logs give model {name!r} under config {config_id}: "
                             f"{known.run.source} and {run.source}")
        return known

    def _chunk(self, run: LogRun, report: MatchReport, keep, epoch) -> PlannedChunk:
        """The matched samples' cells, a column at a time (a million cells a log)."""
        config = self._config(run, epoch)
        config.add(report)
        matched = report.matched
        uids = [m.item.item_uid for m in matched]
        self._check_once(config, run, matched, uids)
        at = report.positions if keep is None else [keep[k] for k in report.positions]
        outcomes = [run.outcome(k) for k in at]
        correct = [bool(c) for c, _ in outcomes]
        config.wider += sum(m.options > len(m.item.choices) for m in matched)
        config.n_correct += sum(correct)
        out = PlannedChunk(config, {
            "item_uid": uids, "correct": correct,
            "pred": [m.native(p) for m, (_, p) in zip(matched, outcomes)],
            "permutation": [m.permutation for m in matched],
            "raw_output": [capped(m.sample.raw_output) for m in matched],
            "scores": [m.scores for m in matched],
            "prompt": [capped(m.sample.prompt) for m in matched]})
        config.n_cells += out.n_cells
        return out

    @staticmethod
    def _check_once(config: ConfigImport, run: LogRun, matched, uids) -> None:
        """An item scored twice under one config (in this chunk or an earlier one) is an
        error naming both lines."""
        seen = config.seen
        if len(set(uids)) == len(uids) and seen.keys().isdisjoint(uids):
            seen.update(zip(uids, (m.sample.line for m in matched)))
            return
        for uid, m in zip(uids, matched):
            if uid in seen:
                raise InputError(f"item {uid!r} is scored twice under {config.config_id}: "
                                 f"{_where(run.source, seen[uid])} and {m.sample.where} "
                                 "(duplicate sample ids?)", path=run.source)
            seen[uid] = m.sample.line


def _where(source: str, line) -> str:
    return f"{source}{':' if isinstance(line, int) else '#'}{line}"
