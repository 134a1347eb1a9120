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
from fragility_tui.imports.matching import MatchReport, match_samples, normalise
from fragility_tui.imports.records import LogRun, LogSample
from fragility_tui.items.item import Item

RAW_OUTPUT_CAP = 4096  # characters of a log's answer kept per cell


@dataclass
class PlannedRun:
    run: LogRun
    config_id: str
    model: str
    axes: dict
    report: MatchReport
    cells: list[dict] = field(default_factory=list)  # CellRow fields
    wider: int = 0  # samples scored over more options than the item's four

    @property
    def accuracy(self) -> float | None:
        return sum(c["correct"] for c in self.cells) / len(self.cells) if self.cells else None

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
    from fragility_tui.items.item import RawItem, assemble

    items: dict[str, Item] = {}
    for run in runs:
        for s in run.samples:
            raw = _raw_item(run, s)
            if raw is None:
                continue
            item = assemble(raw)
            if item is not None and item.item_uid not in items:
                items[item.item_uid] = item
    return list(items.values())


def _raw_item(run: LogRun, s: LogSample):
    from fragility_tui.items.item import RawItem

    doc = s.doc if isinstance(s.doc, dict) else {}
    if all(k in doc for k in ("id", "question", "choices", "gold")) and \
            isinstance(doc["choices"], list):
        try:
            return RawItem(str(doc["id"]), str(doc.get("benchmark") or run.task),
                           doc.get("subject"), str(doc["question"]),
                           tuple(map(str, doc["choices"])), int(doc["gold"]))
        except (TypeError, ValueError):
            return None
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
    """Match every run's samples to items and make its cells; epochs of one sample become
    replicate configs (+eN). Raises when a run matches nothing or repeats a sample."""
    planned = []
    for run in runs:
        epochs = sorted({s.epoch for s in run.samples})
        for epoch in epochs:
            samples = [s for s in run.samples if s.epoch == epoch]
            planned.append(_plan_one(run, samples, items, model,
                                     epoch if len(epochs) > 1 else None))
    seen = {}
    for p in planned:
        key = (p.model, p.config_id)
        if key in seen:
            raise InputError(f"two logs give model {p.model!r} under config {p.config_id}: "
                             f"{seen[key]} and {p.run.source}")
        seen[key] = p.run.source
    return planned


def _plan_one(run: LogRun, samples, items, model, epoch) -> PlannedRun:
    name = model or run.model
    if not name:
        raise InputError("the log does not name its model: give --model", path=run.source)
    config_id = imported_config_id(run.harness, run.task, run.metric, run.shots, epoch,
                                   run.chat)
    axes = {**run.axes}
    report = match_samples(samples, items)
    if not report.matched:
        raise InputError(f"no sample of {config_id} matches an item of the grid "
                         f"({report.summary()}); pass --items with the task's item file",
                         path=run.source)
    out = PlannedRun(run, config_id, name, axes, report)
    first: dict[str, str] = {}
    for m in report.matched:
        uid = m.item.item_uid
        if uid in first:
            raise InputError(f"item {uid!r} is scored twice under {config_id}: "
                             f"{first[uid]} and {m.sample.where} (duplicate sample ids?)",
                             path=run.source)
        first[uid] = m.sample.where
        out.wider += m.options > len(m.item.choices)
        out.cells.append(_cell(name, config_id, m))
    return out


def _cell(model: str, config_id: str, m) -> dict:
    s = m.sample
    raw = s.raw_output
    if raw is not None and len(raw) > RAW_OUTPUT_CAP:
        raw = raw[:RAW_OUTPUT_CAP]
    prompt = s.prompt[:RAW_OUTPUT_CAP] if s.prompt is not None else None
    return {"model": model, "item_uid": m.item.item_uid, "config_id": config_id,
            "correct": bool(s.correct), "pred": m.pred, "permutation": m.permutation,
            "raw_output": raw, "scores": _native_scores(m), "prompt": prompt}


def _native_scores(m) -> list[float] | None:
    """The log's per-option scores in the item's native order (only when the log scored
    exactly the item's options)."""
    s = m.sample
    if not s.scores or not s.choices or len(s.scores) != len(s.choices) \
            or len(s.choices) != len(m.item.choices):
        return None
    by_text = {normalise(c): v for c, v in zip(s.choices, s.scores)}
    try:
        return [float(by_text[normalise(c)]) for c in m.item.choices]
    except KeyError:
        return None
