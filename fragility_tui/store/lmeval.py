"""lm-evaluation-harness interop: its `--log_samples` output ⇄ fragility cells.

Reading: one JSON object per line with `doc`, `arguments` (the (context, " option")
requests, as a list of pairs or lm-eval 0.4.13's {"gen_args_k": {"arg_0", "arg_1"}} dict) and
`resps`/`filtered_resps` (per option [log-likelihood, is_greedy], numbers or strings).
An item is matched by an id field of `doc` (default "id") or, failing that, by content: the
grid item whose four options are all among the sample's continuations and whose question
occurs in the context. The prediction is the argmax over the item's four options of the raw
log-likelihood (`acc`) or of log-likelihood / option length in characters (`acc_norm`), first
maximum on ties — exactly lm-eval's rule.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.files import write_output
from fragility_tui.items.item import Item
from fragility_tui.store.store import CellRow

METRICS = ("acc", "acc_norm")


@dataclass(frozen=True)
class LmevalSample:
    line: int
    doc_id: int | str | None
    doc: dict
    contexts: tuple[str, ...]
    options: tuple[str, ...]  # continuations with the target delimiter (" ") removed
    loglikelihoods: tuple[float, ...]
    reported: dict  # lm-eval's own metric values for this doc (acc, acc_norm)


def read_samples(path: str | Path) -> list[LmevalSample]:
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file", path=str(path))
    samples = []
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise InputError("invalid UTF-8", path=str(path), line=lineno) from None
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON ({exc.msg})", path=str(path), line=lineno) from None
            samples.append(_parse_sample(record, str(path), lineno))
    if not samples:
        raise InputError("no samples in file", path=str(path))
    return samples


def _parse_sample(record: dict, path: str, line: int) -> LmevalSample:
    if not isinstance(record, dict):
        raise InputError("a sample must be a JSON object", path=path, line=line)
    for key in ("doc", "arguments"):
        if key not in record:
            raise InputError(f"missing {key!r}: not an lm-eval --log_samples line", path=path,
                             line=line, field=key)
    args = record["arguments"]
    if isinstance(args, dict):  # lm-eval 0.4.x: {"gen_args_0": {"arg_0": ctx, "arg_1": cont}}
        pairs = [(a.get("arg_0"), a.get("arg_1")) for _, a in sorted(
            args.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[-1]))]
    else:
        pairs = [tuple(a[:2]) for a in args]
    if not pairs or any(not isinstance(c, str) or not isinstance(o, str) for c, o in pairs):
        raise InputError("arguments must be (context, continuation) string pairs: only "
                         "multiple_choice (loglikelihood) tasks can be imported", path=path,
                         line=line, field="arguments")
    resps = record.get("filtered_resps") or [r[0] for r in record.get("resps", [])]
    if len(resps) != len(pairs):
        raise InputError(f"{len(resps)} responses for {len(pairs)} options", path=path,
                         line=line, field="filtered_resps")
    try:
        lls = tuple(float(r[0] if isinstance(r, (list, tuple)) else r) for r in resps)
    except (TypeError, ValueError, IndexError):
        raise InputError("responses must be [log-likelihood, is_greedy] pairs", path=path,
                         line=line, field="filtered_resps") from None
    options = tuple(o[1:] if o.startswith(" ") else o for _, o in pairs)
    reported = {m: record[m] for m in METRICS if m in record}
    return LmevalSample(line, record.get("doc_id"), record["doc"],
                        tuple(c for c, _ in pairs), options, lls, reported)


def predict(item: Item, sample: LmevalSample, metric: str) -> tuple[int, list[float]]:
    """(native prediction, the item's four raw log-likelihoods) under lm-eval's rule."""
    index = {opt: k for k, opt in reversed(list(enumerate(sample.options)))}
    lls = [sample.loglikelihoods[index[choice]] for choice in item.choices]
    if metric == "acc_norm":
        scores = [ll / max(len(choice), 1) for ll, choice in zip(lls, item.choices)]
    else:
        scores = lls
    best = max(range(len(scores)), key=lambda k: (scores[k], -k))
    return best, lls


class ItemMatcher:
    def __init__(self, items: list[Item], id_field: str = "id"):
        self.id_field = id_field
        self.by_uid = {it.item_uid: it for it in items}
        self.by_source: dict[str, list[Item]] = {}
        self.by_choice: dict[str, set[str]] = {}
        for it in items:
            self.by_source.setdefault(it.source_id, []).append(it)
            for choice in it.choices:
                self.by_choice.setdefault(choice, set()).add(it.item_uid)

    def match(self, sample: LmevalSample) -> Item | None:
        doc_id = sample.doc.get(self.id_field) if isinstance(sample.doc, dict) else None
        if doc_id is not None:
            doc_id = str(doc_id)
            if doc_id in self.by_uid:
                return self.by_uid[doc_id]
            found = self.by_source.get(doc_id, [])
            bench = sample.doc.get("benchmark")
            found = [it for it in found if bench is None or it.benchmark == bench] or found
            if len(found) == 1:
                return found[0]
        return self._match_content(sample)

    def _match_content(self, sample: LmevalSample) -> Item | None:
        option_set = set(sample.options)
        candidates: dict[str, int] = {}
        for opt in option_set:
            for uid in self.by_choice.get(opt, ()):
                candidates[uid] = candidates.get(uid, 0) + 1
        full = [self.by_uid[u] for u, n in candidates.items()
                if set(self.by_uid[u].choices) <= option_set]
        context = sample.contexts[0]
        narrowed = [it for it in full if it.question and it.question in context] or full
        return narrowed[0] if len(narrowed) == 1 else None


def samples_to_cells(samples: list[LmevalSample], items: list[Item], *, model: str,
                     config: str, metric: str = "acc_norm", id_field: str = "id",
                     path: str = "") -> tuple[list[CellRow], dict]:
    """Cells for every sample; an unmatched sample is an error naming its line."""
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r} (acc, acc_norm)", field="--metric")
    matcher = ItemMatcher(items, id_field)
    cells, seen = [], {}
    agree = compared = 0
    for sample in samples:
        item = matcher.match(sample)
        if item is None:
            raise InputError(f"sample doc_id={sample.doc_id!r} matches no item (by {id_field!r} "
                             "or by content); pass --items with the task's item file",
                             path=path, line=sample.line)
        if item.item_uid in seen:
            raise InputError(f"item {item.item_uid!r} appears twice (first at line "
                             f"{seen[item.item_uid]})", path=path, line=sample.line)
        seen[item.item_uid] = sample.line
        missing = [c for c in item.choices if c not in sample.options]
        if missing:
            raise InputError(f"item {item.item_uid!r}: option {missing[0]!r} is not among the "
                             "sample's continuations", path=path, line=sample.line)
        pred, lls = predict(item, sample, metric)
        correct = pred == item.gold
        if metric in sample.reported and len(sample.options) == len(item.choices):
            compared += 1
            agree += int(bool(sample.reported[metric]) == correct)
        cells.append(CellRow(model, item.item_uid, config, correct, pred, None, None, lls))
    summary = {"cells": len(cells), "accuracy": sum(c.correct for c in cells) / len(cells),
               "agree_with_lmeval": agree, "compared_with_lmeval": compared}
    return cells, summary


def items_from_docs(samples: list[LmevalSample], path: str) -> list[Item]:
    """Items from docs written in our normalised schema (id, benchmark, question, choices,
    gold), e.g. a task reading our JSONL or our own lmeval-samples export."""
    from fragility_tui.items.item import RawItem, assemble

    items = []
    for s in samples:
        doc = s.doc
        if not all(k in doc for k in ("id", "question", "choices", "gold")):
            raise InputError("the docs are not in fragility's item schema (id, question, "
                             "choices, gold); pass --items with the task's item file",
                             path=path, line=s.line, field="doc")
        item = assemble(RawItem(str(doc["id"]), doc.get("benchmark") or "lmeval",
                                doc.get("subject"), doc["question"], tuple(doc["choices"]),
                                int(doc["gold"])))
        if item is None:
            raise InputError("doc has fewer than 4 choices", path=path, line=s.line, field="doc")
        items.append(item)
    return items


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cells_to_samples(items: list[Item], cells: dict[str, dict], config: str) -> list[dict]:
    """lm-eval 0.4.13-shaped sample records for the items with stored log-likelihoods."""
    from fragility_tui.harness.render import render

    records = []
    for doc_id, item in enumerate(it for it in items if it.item_uid in cells):
        lls = cells[item.item_uid]["scores"]
        prompt = render(item, config, 0)
        context = prompt.context
        doc = item.to_json()
        norm = [ll / max(len(c), 1) for ll, c in zip(lls, item.choices)]
        greedy = [False] * len(lls)
        records.append({
            "doc_id": doc_id,
            "doc": doc,
            "target": str(item.gold),
            "arguments": {f"gen_args_{k}": {"arg_0": context, "arg_1": " " + c}
                          for k, c in enumerate(item.choices)},
            "resps": [[[str(ll), str(g)]] for ll, g in zip(lls, greedy)],
            "filtered_resps": [[str(ll), str(g)] for ll, g in zip(lls, greedy)],
            "filter": "none",
            "metrics": list(METRICS),
            "doc_hash": _sha(json.dumps(doc, indent=2, ensure_ascii=False)),
            "prompt_hash": _sha(context),
            "target_hash": _sha(str(item.gold)),
            "acc": float(_argmax(lls) == item.gold),
            "acc_norm": float(_argmax(norm) == item.gold),
        })
    return records


def _argmax(values) -> int:
    return max(range(len(values)), key=lambda k: (values[k], -k))


def export_samples(store, grid: str, model: str, config: str, out: str | Path) -> int:
    from fragility_tui.harness.config_axes import is_runner_config
    from fragility_tui.harness.configs import get_config

    if not is_runner_config(config):  # its prompts are another harness's: none to render
        raise InputError(f"config {config} was imported from another harness's log, which is "
                         "its record; lm-eval samples are exported for this tool's own cloze "
                         "configs (cloze_qa, cloze_bare)", field="--config")
    if get_config(config).scoring != "likelihood":
        raise InputError(f"config {config} is not scored by each option's text (a generation "
                         "or letter-likelihood config); lm-eval samples carry option "
                         "log-likelihoods: export cloze_qa or cloze_bare", field="--config")
    with store.connect() as con:
        rows = con.execute("SELECT item_uid, scores FROM cells WHERE grid = ? AND model = ? AND "
                           "config_id = ? AND scores IS NOT NULL", [grid, model, config]).fetchall()
    if not rows:
        raise InputError(f"grid {grid!r} has no {config} cells with log-likelihoods for model "
                         f"{model!r}", field="--model")
    cells = {uid: {"scores": scores} for uid, scores in rows}
    records = cells_to_samples(store.load_items(grid), cells, config)
    write_output(out, lambda fh: fh.write("".join(
        json.dumps(rec, ensure_ascii=False) + "\n" for rec in records).encode("utf-8")))
    return len(records)
