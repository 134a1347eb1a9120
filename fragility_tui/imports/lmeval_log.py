"""lm-evaluation-harness `--log_samples` output: `samples_<task>_<date>.jsonl` with the run's
`results_<date>.json` beside it, which says what the config was: the task's YAML
(`configs.<task>`: output type, prompt template, delimiters), `n-shot`, the chat template's
hash, the model args (`add_bos_token`). Multiple-choice tasks give one config per metric
(`acc`, `acc_norm`), generation tasks one per metric and filter (`exact_match`).
Correctness is the sample's own metric value, so the import reproduces lm-eval's number.

The Open LLM Leaderboard's published details are this shape too (lm-eval 0.4.x on its
`leaderboard_*` tasks): samples files named `.json` before lm-eval's June 2024 rename, lines
without `metrics` / `filter` (added in 0.4.7), and multiple-choice tasks that score the
options' letters (`A`..`J` for MMLU-Pro, `(A)`..`(D)` for GPQA) rather than their text: the
option texts are then read from the doc (`options`, `choices` or `choice1`..`choiceN`)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.imports.records import LogRun, LogSample, jsonl_objects, short_hash

NAME = "lm-eval"
MC_METRICS = ("acc", "acc_norm")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# lm-eval named samples files `.json` (JSON lines all the same) until June 2024 (its PR
# #1930); the Open LLM Leaderboard's details of that time keep the old name
SUFFIXES = (".jsonl", ".json")
# how a task that scores letters shows them: MMLU-Pro `A`, GPQA `(A)`, others `A.` / `A)`
LABEL_FORMS = ("{}", "({})", "{}.", "{})")
FIRST_LABELS = frozenset(form.format("A") for form in LABEL_FORMS)
# a run's timestamp in its file names: datetime.now().isoformat() with ':' made '-'
RUN_STAMP = re.compile(r"_(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d(?:\.\d+)?)\.jsonl?$")


def sniff(path: Path) -> bool:
    return path.is_file() and path.name.startswith("samples_") and path.suffix in SUFFIXES


def expand(path: Path) -> list[Path]:
    """The samples files of a path (a samples file, or a folder of lm-eval's output)."""
    if path.is_dir():
        return sorted(p for suffix in SUFFIXES for p in path.rglob(f"samples_*{suffix}"))
    return [path]


def results_beside(samples: Path) -> Path:
    """The run's results file: the one with the samples file's timestamp (lm-eval names both
    with it; a model's folder of the leaderboard's details holds every run); without
    timestamps in the names, the last by name. Stamped files of other runs only: an error."""
    found = sorted(samples.parent.glob("results*.json"))
    if not found:
        raise InputError("no results_*.json beside this samples file: lm-eval writes both "
                         "and the config (task, shots, template, chat template) is read from "
                         "it; or use import-lmeval with --config", path=str(samples))
    stamp = RUN_STAMP.search(samples.name)
    stamped = {m.group(1): p for p in found if (m := RUN_STAMP.search(p.name))}
    if stamp is None or not stamped:
        return found[-1]
    if stamp.group(1) not in stamped:  # another run's config is not this one's
        raise InputError(f"no results file of this run ({stamp.group(1)}) beside it: "
                         f"{', '.join(p.name for p in stamped.values())} "
                         f"{'is' if len(stamped) == 1 else 'are'} another run's; download "
                         f"results_{stamp.group(1)}.json with the samples", path=str(samples))
    return stamped[stamp.group(1)]


def _task_of(samples: Path, results: dict, results_path: Path) -> str:
    stem = samples.name[len("samples_"):-len(samples.suffix)]
    tasks = sorted((t for t in results.get("configs", {})
                    if stem == t or stem.startswith(t + "_")),
                   key=len, reverse=True)
    if not tasks:
        raise InputError(f"results file {results_path.name} has no task config for "
                         f"{samples.name} (tasks: {', '.join(results.get('configs', {}))})",
                         path=str(samples))
    return tasks[0]


CHUNK = 100_000  # lines read, matched and written at a time (a million-line log streams)


def read(path: Path, *, model: str | None = None, metric: str | None = None) -> list[LogRun]:
    """Every run of the samples file at once (small logs, tests)."""
    return [run for chunk in read_chunks(path, model=model, metric=metric, size=0)
            for run in chunk]


def read_chunks(path: Path, *, model: str | None = None, metric: str | None = None,
                size: int | None = None):
    """The file's runs a chunk of `size` lines at a time (None: CHUNK; 0: the whole file
    as one): each chunk's runs hold that chunk's samples, one shared list per chunk, and
    each metric's correctness and pick. The metrics every line carries are the first
    line's."""
    size = CHUNK if size is None else size
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
    keys: dict[str, str] | None = None  # run key -> metric, from the first line
    runs: dict[str, LogRun] = {}
    samples: list[LogSample] = []
    first = None  # the first line's (metric names, filter): most lines repeat it
    names = [m.get("metric") for m in task_cfg.get("metric_list") or ()
             if isinstance(m, dict) and isinstance(m.get("metric"), str)]
    for sample, line_metrics, filt in _samples(path, output_type, tuple(names) or MC_METRICS):
        signature = (line_metrics.keys(), filt)
        if signature != first:  # the first line, or one whose metrics differ
            chosen = {(name if filt in (None, "none") else f"{name}-{filt}"): name
                      for name in line_metrics if metric in (None, name)}
            if keys is None:
                keys, first = chosen, signature
            elif chosen.keys() != keys.keys():
                missing = sorted(keys.keys() - chosen.keys()) or sorted(chosen.keys() - keys.keys())
                raise InputError(f"the sample's metrics differ from the first line's "
                                 f"({', '.join(missing)})", path=str(path), line=sample.line)
        if not runs:
            runs = {key: _run(results, results_path, path, task, task_cfg, key, name, filt,
                              shots, output_type, model) for key, name in keys.items()}
            samples = []
            for run in runs.values():
                run.samples, run.correct, run.pred = samples, [], []
        samples.append(sample)
        for key, name in keys.items():
            run = runs[key]
            run.correct.append(line_metrics[name])
            run.pred.append(_pred(sample, name, output_type))
        if size and len(samples) >= size:
            yield list(runs.values())
            runs = {}
    if runs:
        yield list(runs.values())
    elif not keys:
        have = ", ".join(names or MC_METRICS)
        raise InputError(f"no samples with metric {metric!r} (the task's metrics: {have})"
                         if metric else "no samples", path=str(path))


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


def _samples(path: Path, output_type: str, metrics: tuple[str, ...] = MC_METRICS):
    """(sample, {metric: correct}, filter) per line; `read_chunks` gives each metric's run
    its correctness and pick. A line names its metrics (`metrics`, lm-eval 0.4.7 on); an
    older one's are the task config's `metric_list` found in it."""
    reader = _mc_sample if output_type == "multiple_choice" else _gen_sample
    source = str(path)
    for lineno, record in jsonl_objects(path, "doc", "an lm-eval --log_samples"):
        names = [m for m in (record.get("metrics") or metrics) if m in record]
        if not names:
            raise InputError("the sample has no metric value", path=source, line=lineno)
        try:
            metrics = {m: float(record[m]) > 0 for m in names}
        except (TypeError, ValueError):
            raise InputError("a metric value is not a number", path=source,
                             line=lineno) from None
        yield reader(record, source, lineno), metrics, record.get("filter")


def _pairs(record, path, line):
    args = record.get("arguments")
    if isinstance(args, dict):  # 0.4.x: {"gen_args_0": {"arg_0": ctx, "arg_1": cont}}
        try:
            if list(args) == _arg_keys(len(args)):  # as lm-eval writes them: in order
                return [(a["arg_0"], a.get("arg_1")) for a in args.values()]
            return [(a.get("arg_0"), a.get("arg_1")) for _, a in sorted(
                args.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[-1]))]
        except (ValueError, AttributeError, KeyError, TypeError):
            pass
    elif isinstance(args, list):
        return [tuple(a[:2]) if isinstance(a, list) else (a, None) for a in args]
    raise InputError("unreadable 'arguments'", path=path, line=line, field="arguments")


_ARG_KEYS: dict[int, list[str]] = {}


def _arg_keys(n: int) -> list[str]:
    if n not in _ARG_KEYS:
        _ARG_KEYS[n] = [f"gen_args_{k}" for k in range(n)]
    return _ARG_KEYS[n]


def _doc(record) -> dict:
    doc = record.get("doc")
    return doc if isinstance(doc, dict) else {}


def _doc_item(doc: dict) -> tuple | None:
    """(id, benchmark, subject, gold) of a doc in our item schema, else None (benchmark and
    subject interned: a million lines name a handful)."""
    if doc.get("id") is None or not isinstance(doc.get("gold"), int):
        return None
    return (str(doc["id"]), _intern(doc.get("benchmark")), _intern(doc.get("subject")),
            doc["gold"])


def _intern(value):
    return sys.intern(value) if isinstance(value, str) else value


def _mc_sample(record, path, line) -> LogSample:
    pairs = _pairs(record, path, line)
    try:
        choices = tuple(o[1:] if o.startswith(" ") else o for _, o in pairs)
    except (AttributeError, TypeError):
        choices = None
    context = pairs[0][0] if pairs else None
    if choices is None or not isinstance(context, str):
        raise InputError("a multiple-choice sample needs (context, continuation) pairs",
                         path=path, line=line, field="arguments")
    resps = record.get("filtered_resps") or [r[0] for r in record.get("resps", [])]
    try:
        lls = tuple([float(r[0]) for r in resps])
    except (TypeError, ValueError, IndexError, KeyError):
        try:
            lls = tuple([float(r) for r in resps])  # bare numbers
        except (TypeError, ValueError):
            raise InputError("responses must be [log-likelihood, is_greedy] pairs",
                             path=path, line=line, field="filtered_resps") from None
    if len(lls) != len(pairs):
        raise InputError(f"{len(lls)} responses for {len(pairs)} options", path=path,
                         line=line, field="filtered_resps")
    doc = _doc(record)
    question = doc.get("question")
    if not isinstance(question, str):
        question = doc.get("Question")  # GPQA's column
    target = _target_index(record.get("target"), choices)
    pred = None
    if choices[0].strip() in FIRST_LABELS and _labels(choices):
        options = _doc_options(doc, len(choices))
        if options is not None:  # else the letters stay: matched by a doc id, if any
            # the letters are one length: acc_norm's pick (log-likelihood / length) is acc's
            choices, pred = options, lls.index(max(lls))
    return LogSample(path, line, _str(record.get("doc_id")), False,
                     question if isinstance(question, str) else context, choices,
                     target, pred, None, lls, _doc_item(doc), prompt=context)


def _labels(shown: tuple[str, ...]) -> bool:
    """The continuations are letters in order (`A`, `B`, … or `(A)`, `(B)`, …), one form."""
    if len(shown) > len(LETTERS):
        return False
    return any(all(s.strip() == form.format(LETTERS[k]) for k, s in enumerate(shown))
               for form in LABEL_FORMS)


def _doc_options(doc: dict, n: int) -> tuple[str, ...] | None:
    """The option texts a doc holds, as many as the letters scored: MMLU-Pro's `options`, a
    `choices` list (MMLU, our schema), the leaderboard's GPQA `choice1`..`choice4`."""
    for key in ("options", "choices"):
        found = doc.get(key)
        if isinstance(found, list) and len(found) == n and all(isinstance(o, str)
                                                               for o in found):
            return tuple(found)
    numbered = tuple(doc.get(f"choice{k}") for k in range(1, n + 1))
    return numbered if all(isinstance(o, str) for o in numbered) else None


def _gen_sample(record, path, line) -> LogSample:
    resps = record.get("filtered_resps")
    text = resps[0] if isinstance(resps, list) and resps else None
    raw = record.get("resps")
    raw_text = raw[0][0] if isinstance(raw, list) and raw and isinstance(raw[0], list) \
        and raw[0] else text
    doc = _doc(record)
    choices = doc.get("choices")
    choices = tuple(map(str, choices)) if isinstance(choices, list) else None
    target = _target_index(record.get("target"), choices or ())
    pred = None
    if isinstance(text, str) and choices and len(text.strip()) == 1 \
            and text.strip() in LETTERS[:len(choices)]:
        pred = LETTERS.index(text.strip())
    context = _pairs(record, path, line)[0][0]
    question = doc.get("question") if isinstance(doc.get("question"), str) else None
    return LogSample(path, line, _str(record.get("doc_id")), False, question, choices,
                     target, pred, raw_text if isinstance(raw_text, str) else None, None,
                     _doc_item(doc), prompt=context if isinstance(context, str) else None)


def _pred(sample: LogSample, metric: str, output_type: str) -> int | None:
    """The option a metric's argmax picks (multiple choice; first maximum on ties,
    lm-eval's rule), in the order shown; a generation sample's parsed letter."""
    scores = sample.scores
    if output_type != "multiple_choice" or not scores or sample.pred is not None:
        return sample.pred  # a generation's letter; the pick over letters (_mc_sample)
    if metric == "acc_norm":
        scores = [v / (len(c) or 1) for v, c in zip(scores, sample.choices)]
    return scores.index(max(scores))  # the first maximum


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


def _str(value) -> str | int | None:
    """A sample id as the log has it (an int stays one: a million of them as strings is
    50 MB); compared as text where it is matched."""
    return value if value is None or isinstance(value, int) else str(value)
