"""lm-evaluation-harness `--log_samples` output: `samples_<task>_<date>.jsonl` with the run's
`results_<date>.json` beside it, which says what the config was: the task's YAML
(`configs.<task>`: output type, prompt template, delimiters), `n-shot`, the chat template's
hash, the model args (`add_bos_token`). Multiple-choice tasks give one config per metric
(`acc`, `acc_norm`), generation tasks one per metric and filter (`exact_match`).
Correctness is the sample's own metric value, so the import reproduces lm-eval's number."""

from __future__ import annotations

import json
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.imports.records import LogRun, LogSample, short_hash

NAME = "lm-eval"
MC_METRICS = ("acc", "acc_norm")
LETTERS = "ABCDEFGHIJ"


def sniff(path: Path) -> bool:
    return path.is_file() and path.name.startswith("samples_") and path.suffix == ".jsonl"


def expand(path: Path) -> list[Path]:
    """The samples files of a path (a samples file, or a folder of lm-eval's output)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("samples_*.jsonl"))
    return [path]


def results_beside(samples: Path) -> Path:
    found = sorted(samples.parent.glob("results*.json"))
    if not found:
        raise InputError("no results_*.json beside this samples file: lm-eval writes both "
                         "and the config (task, shots, template, chat template) is read from "
                         "it; or use import-lmeval with --config", path=str(samples))
    return found[-1]


def _task_of(samples: Path, results: dict, results_path: Path) -> str:
    stem = samples.name[len("samples_"):-len(".jsonl")]
    tasks = sorted((t for t in results.get("configs", {})
                    if stem == t or stem.startswith(t + "_")),
                   key=len, reverse=True)
    if not tasks:
        raise InputError(f"results file {results_path.name} has no task config for "
                         f"{samples.name} (tasks: {', '.join(results.get('configs', {}))})",
                         path=str(samples))
    return tasks[0]


def read(path: Path, *, model: str | None = None, metric: str | None = None) -> list[LogRun]:
    results_path = results_beside(path)
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not an lm-eval results file: {exc}", path=str(results_path)) from None
    if not isinstance(results, dict) or "configs" not in results:
        raise InputError("not an lm-eval results file (no 'configs')", path=str(results_path))
    task = _task_of(path, results, results_path)
    task_cfg = results["configs"][task]
    output_type = task_cfg.get("output_type", "multiple_choice")
    shots = (results.get("n-shot") or {}).get(task, task_cfg.get("num_fewshot"))
    runs: dict[str, LogRun] = {}
    for sample, line_metrics, filt in _samples(path, output_type):
        for name, correct in line_metrics.items():
            if metric is not None and name != metric:
                continue
            key = name if filt in (None, "none") else f"{name}-{filt}"
            run = runs.get(key)
            if run is None:
                run = runs[key] = _run(results, results_path, path, task, task_cfg, key,
                                       name, filt, shots, output_type, model)
            run.samples.append(_with(sample, correct, name, output_type))
    if not runs:
        raise InputError(f"no samples with metric {metric!r}" if metric else "no samples",
                         path=str(path))
    return list(runs.values())


def _run(results, results_path, path, task, task_cfg, key, name, filt, shots, output_type,
         model) -> LogRun:
    chat_sha = results.get("chat_template_sha")
    model_args = (results.get("config") or {}).get("model_args") or {}
    if isinstance(model_args, str):  # older lm-eval: "pretrained=...,dtype=..."
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    axes = {"scoring": {"multiple_choice": "likelihood", "generate_until": "generate"}
            .get(output_type, output_type),
            "template": short_hash(*(task_cfg.get(k) for k in (
                "doc_to_text", "doc_to_choice", "doc_to_target", "target_delimiter",
                "fewshot_delimiter", "description")), results.get("system_instruction_sha")),
            # the chat template is its own axis: the same task with and without it
            "chat": chat_sha[:12] if chat_sha else "off"}
    bos = model_args.get("add_bos_token")
    if bos is not None:
        axes["bos"] = "on" if str(bos).lower() == "true" else "off"
    reported = (results.get("results") or {}).get(task, {}).get(f"{name},{filt or 'none'}")
    name_in_log = str(results.get("model_name") or model_args.get("pretrained") or "")
    return LogRun(
        harness=NAME, task=task, metric=key, shots=None if shots is None else int(shots),
        axes=axes, model=model or (Path(name_in_log).name or None), source=str(path),
        reported_accuracy=float(reported) if isinstance(reported, (int, float)) else None,
        chat=bool(chat_sha),
        provenance={"harness": NAME, "lm_eval_version": results.get("lm_eval_version"),
                    "transformers_version": results.get("transformers_version"),
                    "model_name": name_in_log, "model_args": model_args,
                    "results_file": str(results_path), "samples_file": str(path),
                    "task_hash": (results.get("task_hashes") or {}).get(task),
                    "chat_template_sha": chat_sha, "n_shot": shots})


def _samples(path: Path, output_type: str):
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(raw)
            except (UnicodeDecodeError, ValueError) as exc:
                raise InputError(f"invalid JSON ({exc})", path=str(path), line=lineno) from None
            if not isinstance(record, dict) or "doc" not in record:
                raise InputError("not an lm-eval --log_samples line (no 'doc')",
                                 path=str(path), line=lineno)
            names = [m for m in (record.get("metrics") or MC_METRICS) if m in record]
            if not names:
                raise InputError("the sample has no metric value", path=str(path), line=lineno)
            try:
                metrics = {m: float(record[m]) > 0 for m in names}
            except (TypeError, ValueError):
                raise InputError("a metric value is not a number", path=str(path),
                                 line=lineno) from None
            reader = _mc_sample if output_type == "multiple_choice" else _gen_sample
            yield reader(record, where, str(path), lineno), metrics, record.get("filter")


def _pairs(record, path, line):
    args = record.get("arguments")
    if isinstance(args, dict):  # 0.4.x: {"gen_args_0": {"arg_0": ctx, "arg_1": cont}}
        try:
            return [(a.get("arg_0"), a.get("arg_1")) for _, a in sorted(
                args.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[-1]))]
        except (ValueError, AttributeError):
            pass
    elif isinstance(args, list):
        return [tuple(a[:2]) if isinstance(a, list) else (a, None) for a in args]
    raise InputError("unreadable 'arguments'", path=path, line=line, field="arguments")


def _doc(record):
    doc = record.get("doc")
    return doc if isinstance(doc, dict) else None


def _mc_sample(record, where, path, line) -> LogSample:
    pairs = _pairs(record, path, line)
    if any(not isinstance(c, str) or not isinstance(o, str) for c, o in pairs):
        raise InputError("a multiple-choice sample needs (context, continuation) pairs",
                         path=path, line=line, field="arguments")
    resps = record.get("filtered_resps") or [r[0] for r in record.get("resps", [])]
    try:
        lls = tuple(float(r[0] if isinstance(r, (list, tuple)) else r) for r in resps)
    except (TypeError, ValueError, IndexError):
        raise InputError("responses must be [log-likelihood, is_greedy] pairs", path=path,
                         line=line, field="filtered_resps") from None
    if len(lls) != len(pairs):
        raise InputError(f"{len(lls)} responses for {len(pairs)} options", path=path,
                         line=line, field="filtered_resps")
    choices = tuple(o[1:] if o.startswith(" ") else o for _, o in pairs)
    target = _target_index(record.get("target"), choices)
    doc = _doc(record)
    question = (doc or {}).get("question") or pairs[0][0]
    return LogSample(where, _str(record.get("doc_id")), False, question, choices, target,
                     None, None, lls, doc, prompt=pairs[0][0])


def _gen_sample(record, where, path, line) -> LogSample:
    resps = record.get("filtered_resps")
    text = resps[0] if isinstance(resps, list) and resps else None
    raw = record.get("resps")
    raw_text = raw[0][0] if isinstance(raw, list) and raw and isinstance(raw[0], list) \
        and raw[0] else text
    doc = _doc(record) or {}
    choices = doc.get("choices")
    choices = tuple(map(str, choices)) if isinstance(choices, list) else None
    target = _target_index(record.get("target"), choices or ())
    pred = None
    if isinstance(text, str) and choices and text.strip()[:1] in LETTERS[:len(choices)] \
            and len(text.strip()) == 1:
        pred = LETTERS.index(text.strip())
    context = _pairs(record, path, line)[0][0]
    return LogSample(where, _str(record.get("doc_id")), False, doc.get("question"), choices,
                     target, pred, raw_text if isinstance(raw_text, str) else None, None,
                     doc or None, prompt=context if isinstance(context, str) else None)


def _with(sample: LogSample, correct: bool, metric: str, output_type: str) -> LogSample:
    """The sample under one metric: its correctness and (multiple choice) the option that
    metric's argmax picks, first maximum on ties, lm-eval's rule."""
    pred = sample.pred
    if output_type == "multiple_choice" and sample.scores:
        scores = sample.scores
        if metric == "acc_norm":
            scores = [s / max(len(c), 1) for s, c in zip(scores, sample.choices)]
        pred = max(range(len(scores)), key=lambda k: (scores[k], -k))
    from dataclasses import replace

    return replace(sample, correct=correct, pred=pred)


def _target_index(target, choices) -> int | None:
    if isinstance(target, int):
        return target
    if isinstance(target, str):
        text = target.strip()
        if text.isdigit():
            return int(text)
        if text in choices:
            return list(choices).index(text)
        if len(text) == 1 and text in LETTERS:
            return LETTERS.index(text)
    return None


def _str(value) -> str | None:
    return None if value is None else str(value)
