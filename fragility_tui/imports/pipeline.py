"""From paths to planned cells: detect each path's format, read its runs, match samples to
items, make one cell per (model, item, config). Pure: the store writes the plan in one
transaction (store/log_import.py)."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.harness.config_axes import imported_config_id
from fragility_tui.imports import reader, readers
from fragility_tui.imports.matching import ItemIndex, MatchReport, match_samples
from fragility_tui.imports.records import LogRun, LogSample
from fragility_tui.items.item import Item

RAW_OUTPUT_CAP = 4096  # characters of a log's answer (and prompt) kept per cell
CELL_FIELDS = ("item_uid", "correct", "pred", "permutation", "raw_output", "scores", "prompt")


@dataclass
class PlannedRun:
    run: LogRun
    config_id: str
    model: str
    axes: dict
    report: MatchReport
    # the cells as columns (a million-row log makes no object per cell)
    columns: dict[str, list] = field(default_factory=lambda: {k: [] for k in CELL_FIELDS})
    wider: int = 0  # samples scored over more options than the item's four

    def release(self) -> None:
        """Drop the cell columns once written (keeping the count and the accuracy)."""
        self._n, self._accuracy = self.n_cells, self.accuracy
        self.columns = None

    @property
    def cells(self) -> list[dict]:
        """The cells as dicts (for tests and small logs)."""
        return [dict(zip(self.columns, row)) for row in zip(*self.columns.values())]

    @property
    def n_cells(self) -> int:
        return self._n if self.columns is None else len(self.columns["item_uid"])

    @property
    def accuracy(self) -> float | None:
        if self.columns is None:
            return self._accuracy
        n = self.n_cells
        return sum(self.columns["correct"]) / n if n else None

    def reproduces(self) -> str:
        """The line that says whether the cells give the log's own accuracy."""
        ours = self.accuracy
        theirs = self.run.reported_accuracy
        if theirs is None:
            return f"accuracy {ours:.3f} (the log states none to compare)"
        if abs(ours - theirs) < 5e-7:
            return f"reproduces the log's accuracy {theirs:.3f}"
        return (f"accuracy {ours:.3f} over the imported cells; the log's own is {theirs:.3f} "
                f"({len(self.report.unmatched) + len(self.report.ambiguous)} samples not "
                "matched to an item)")


def detect(path: Path):
    """The reader of a path: the one whose sniff accepts it (a folder: the first reader
    that finds files of its own in it)."""
    if not path.exists():
        raise InputError("no such file or folder", path=str(path))
    for module in readers():
        if path.is_dir():
            if any(module.sniff(p) for p in module.expand(path)):
                return module
        elif module.sniff(path):
            return module
    raise InputError("not a log this version reads (lm-eval samples_*.jsonl, an Inspect "
                     ".eval or its JSON, a lighteval details parquet, Every Eval Ever "
                     "JSONL); name the format with --format", path=str(path))


def read_runs(paths, fmt: str | None = None, *, model: str | None = None,
              metric: str | None = None) -> list[LogRun]:
    runs = []
    for raw in paths:
        path = Path(raw)
        try:
            module = reader(fmt) if fmt else detect(path)
        except KeyError as exc:
            raise InputError(str(exc.args[0]), field="--format") from None
        files = [p for p in module.expand(path) if not path.is_dir() or module.sniff(p)]
        if not files:
            raise InputError(f"no {module.NAME} logs here", path=str(path))
        for file in files:
            try:
                runs.extend(module.read(file, model=model, metric=metric))
            except zipfile.BadZipFile as exc:
                raise InputError(f"not a readable zip ({exc}): a truncated or damaged "
                                 "log", path=str(file)) from None
    return runs


def items_from_logs(runs: list[LogRun]) -> list[Item]:
    """Items the logs carry whole (question, choices, gold): a doc in our item schema, else
    the sample's own question, options and target. A sample without them adds none."""
    from fragility_tui.items.item import assemble

    items: dict[str, Item] = {}
    seen: set = set()
    for run in runs:
        for s in run.samples:
            key = (s.doc_item[0] if s.doc_item else None, s.item_hint, s.sample_id)
            if key in seen:
                continue
            seen.add(key)
            raw = _raw_item(run, s)
            item = assemble(raw) if raw is not None else None
            if item is not None and item.item_uid not in items:
                items[item.item_uid] = item
    return list(items.values())


def _raw_item(run: LogRun, s: LogSample):
    from fragility_tui.items.item import RawItem

    if s.doc_item is not None and s.question is not None and s.choices:
        source_id, benchmark, subject, gold = s.doc_item
        if isinstance(gold, int) and not isinstance(gold, bool):
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


def plan(runs: list[LogRun], items: list[Item], *, model: str | None = None) -> list[PlannedRun]:
    """Match every run's samples to items (once per samples list: runs of one log share
    theirs) and make its cells; epochs of one sample become replicate configs (+eN).
    Raises when a run matches nothing or repeats a sample."""
    index = ItemIndex(items)
    matched: dict[int, MatchReport] = {}
    planned = []
    for run in runs:
        epochs = sorted({s.epoch for s in run.samples})
        for epoch in epochs:
            if len(epochs) == 1:
                key = id(run.samples)
                if key not in matched:
                    matched[key] = match_samples(run.samples, index)
                report, keep = matched[key], None
            else:
                keep = [k for k, s in enumerate(run.samples) if s.epoch == epoch]
                report = match_samples([run.samples[k] for k in keep], index)
            planned.append(_plan_one(run, report, keep, model,
                                     epoch if len(epochs) > 1 else None))
    seen = {}
    for p in planned:
        key = (p.model, p.config_id)
        if key in seen:
            raise InputError(f"two logs give model {p.model!r} under config {p.config_id}: "
                             f"{seen[key]} and {p.run.source}")
        seen[key] = p.run.source
    return planned


def _plan_one(run: LogRun, report: MatchReport, keep, model, epoch) -> PlannedRun:
    name = model or run.model
    if not name:
        raise InputError("the log does not name its model: give --model", path=run.source)
    config_id = imported_config_id(run.harness, run.task, run.metric, run.shots, epoch,
                                   run.chat)
    if not report.matched:
        raise InputError(f"no sample of {config_id} matches an item of the grid "
                         f"({report.summary()}); pass --items with the task's item file",
                         path=run.source)
    out = PlannedRun(run, config_id, name, dict(run.axes), report)
    cols = out.columns
    first: dict[str, LogSample] = {}
    for m, k in zip(report.matched, report.positions):
        uid = m.item.item_uid
        if uid in first:
            raise InputError(f"item {uid!r} is scored twice under {config_id}: "
                             f"{first[uid].where} and {m.sample.where} (duplicate sample ids?)",
                             path=run.source)
        first[uid] = m.sample
        correct, pred = run.outcome(k if keep is None else keep[k])
        out.wider += m.options > len(m.item.choices)
        cols["item_uid"].append(uid)
        cols["correct"].append(bool(correct))
        cols["pred"].append(m.native(pred))
        cols["permutation"].append(m.permutation)
        cols["raw_output"].append(_capped(m.sample.raw_output))
        cols["scores"].append(m.scores)
        cols["prompt"].append(_capped(m.sample.prompt))
    return out


def _capped(text: str | None) -> str | None:
    return text[:RAW_OUTPUT_CAP] if text is not None and len(text) > RAW_OUTPUT_CAP else text
