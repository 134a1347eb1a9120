"""Every Eval Ever's per-item JSONL (`<uuid>_samples.jsonl`, with its aggregate `<uuid>.json`
beside it): one row per (sample, metric), converted from lm-eval, Inspect, HELM and others.
The harness that scored the samples is the aggregate's `eval_library` (lm_eval → lm-eval,
inspect_ai → inspect), so a log converted by Every Eval Ever lands on that harness's axis
(axis `via` = every-eval-ever); the metric is the row's `evaluation_result_id`.
Correctness is `evaluation.is_correct` (else score > 0). EEE keeps no shot count (axis
shots unknown) and no prompt template; from lm-eval its `sample_id` is a row index, so
such rows match items by content (options and question), never by that index."""

from __future__ import annotations

import json
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.imports.records import LogRun, LogSample, jsonl_objects

NAME = "every-eval-ever"
LIBRARIES = {"lm_eval": "lm-eval", "lm-eval": "lm-eval", "lm-evaluation-harness": "lm-eval",
             "inspect_ai": "inspect", "inspect": "inspect", "helm": "helm",
             "crfm-helm": "helm", "lighteval": "lighteval"}
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def sniff(path: Path) -> bool:
    if path.suffix != ".jsonl" or not path.is_file():
        return False
    with open(path, "rb") as fh:
        head = fh.readline()[:65536]
    return b'"evaluation_result_id"' in head and b'"sample_hash"' in head


def expand(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(path.rglob("*.jsonl"))
    return [path]


def _aggregate(path: Path) -> dict:
    """The aggregate json the samples file belongs to ({} when it is not beside it)."""
    stem = path.name[:-len("_samples.jsonl")] if path.name.endswith("_samples.jsonl") \
        else path.stem
    beside = path.with_name(stem + ".json")
    if not beside.is_file():
        return {}
    try:
        doc = json.loads(beside.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not an Every Eval Ever aggregate file: {exc}", path=str(beside)) \
            from None
    return doc if isinstance(doc, dict) else {}


def read(path: Path, *, model: str | None = None, metric: str | None = None) -> list[LogRun]:
    agg = _aggregate(path)
    library = (agg.get("eval_library") or {}).get("name") or \
        (agg.get("source_metadata") or {}).get("source_name") or "unknown"
    harness = LIBRARIES.get(str(library).lower(), str(library).lower())
    reported = {r.get("evaluation_result_id"): (r.get("score_details") or {}).get("score")
                for r in agg.get("evaluation_results") or [] if isinstance(r, dict)}
    runs: dict[str, LogRun] = {}
    source = str(path)
    for lineno, row in jsonl_objects(path, "evaluation_result_id",
                                     "an Every Eval Ever sample"):
        result_id = str(row["evaluation_result_id"])
        name = _metric(result_id, harness)
        if metric is not None and name != metric:
            continue
        run = runs.get(result_id)
        if run is None:
            run = runs[result_id] = _run(row, agg, harness, name, result_id, reported,
                                         model, source)
        run.samples.append(_sample(row, source, lineno, harness, name))
    if not runs:
        raise InputError(f"no rows of metric {metric!r}" if metric else "no rows",
                         path=source)
    return list(runs.values())


def _metric(result_id: str, harness: str) -> str:
    """The metric as the harness names it: Inspect's `choice:accuracy` is its scorer
    `choice` (what a direct Inspect import calls it)."""
    if harness == "inspect" and result_id.endswith(":accuracy"):
        return result_id[:-len(":accuracy")]
    return result_id


def _run(row, agg, harness, name, result_id, reported, model, source) -> LogRun:
    info = agg.get("model_info") or {}
    model_id = str(info.get("id") or row.get("model_id") or "")
    score = reported.get(result_id)
    return LogRun(
        harness=harness, task=str(row.get("evaluation_name") or "unknown"), metric=name,
        shots=None, axes={"via": "every-eval-ever"}, model=model or model_id.rsplit("/", 1)[-1]
        or None, source=source,
        reported_accuracy=float(score) if isinstance(score, (int, float)) else None,
        provenance={"harness": harness, "via": "every-eval-ever",
                    "schema_version": row.get("schema_version"),
                    "eval_library": agg.get("eval_library"), "model_info": info,
                    "evaluation_id": row.get("evaluation_id"), "log": source})


def _sample(row: dict, source: str, line: int, harness: str, metric: str) -> LogSample:
    evaluation = row.get("evaluation") or {}
    correct = evaluation.get("is_correct")
    if not isinstance(correct, bool):
        score = evaluation.get("score")
        if not isinstance(score, (int, float)):
            raise InputError("the row has neither evaluation.is_correct nor a numeric score",
                             path=source, line=line)
        correct = score > 0
    given = row.get("input") or {}
    choices = given.get("choices")
    choices = tuple(map(str, choices)) if isinstance(choices, list) and choices else None
    reference = given.get("reference")
    reference = reference[0] if isinstance(reference, list) and reference else reference
    output = (row.get("output") or {}).get("raw")
    output = output[0] if isinstance(output, list) and output else output
    output = output if isinstance(output, str) else None
    sample_id = row.get("sample_id")
    sample_id = None if sample_id is None else str(sample_id)
    epoch = (row.get("metadata") or {}).get("epoch")
    prompt = given.get("formatted") or given.get("raw")
    return LogSample(
        source, line, sample_id, correct, given.get("raw") if isinstance(given.get("raw"), str)
        else None, choices, _index(reference, choices), _pred(output, choices, harness, metric),
        output,
        None, None, int(epoch) if str(epoch or "").isdigit() else 1,
        # lm-eval's sample_id is a row index: never an item id
        None if harness == "lm-eval" else sample_id,
        prompt if isinstance(prompt, str) else None)


def _index(reference, choices) -> int | None:
    if reference is None or not choices:
        return None
    text = str(reference).strip()
    if text.isdigit() and int(text) < len(choices):
        return int(text)
    if len(text) == 1 and text in LETTERS[:len(choices)]:
        return LETTERS.index(text)
    return choices.index(text) if text in choices else None


def _pred(output, choices, harness, metric) -> int | None:
    """lm-eval's rows give the text of the raw log-likelihood's argmax, the same under every
    metric (seen in EEE 0.3.0: an acc_norm row shows acc's pick beside acc_norm's
    correctness): it is the prediction of `acc` only. Other harnesses' is a free answer."""
    if output is None or not choices or harness != "lm-eval" or metric != "acc":
        return None
    return choices.index(output) if output in choices else None
