"""lighteval (>= 0.11) `--save-details` output: `details/<model>/<ts>/details_<task>_<ts>.parquet`
(a row per doc, not in item order: structs `doc`, `metric` {acc, acc_norm}, `model_response`
with the logprobs per choice and the token ids) and `results/<model>/results_<ts>.json` (the
model config, the task's config, lighteval's own numbers). One config per metric; a row's own
metric value is its correctness, so the import reproduces lighteval's number."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.imports.records import LogRun, LogSample, short_hash

NAME = "lighteval"
COLUMNS = ("doc", "metric", "model_response")
# how the task makes a prompt of a doc (not the shots: their own axis; not hf_repo: a path)
PROMPT_FIELDS = ("prompt_function", "hf_subset", "sample_fields", "few_shots_split",
                 "few_shots_select", "generation_size", "stop_sequence")


def sniff(path: Path) -> bool:
    return path.is_file() and path.name.startswith("details_") and path.suffix == ".parquet"


def expand(path: Path) -> list[Path]:
    """The details files of a path (a details parquet, or a folder of lighteval's output)."""
    if path.is_dir():
        return sorted(path.rglob("details_*.parquet"))
    return [path]


def read(path: Path, *, model: str | None = None, metric: str | None = None) -> list[LogRun]:
    docs, metrics, resp = _load(path)
    source = str(path)
    if metric is not None and metric not in metrics:
        raise InputError(f"no metric {metric!r} in the details (they have "
                         f"{', '.join(metrics) or 'none'})", path=source)
    names = [metric] if metric is not None else list(metrics)
    ts = path.parent.name if path.name.endswith(f"_{path.parent.name}.parquet") \
        else path.stem.rpartition("_")[2]
    first = next((d.get("task_name") for d in docs if d and d.get("task_name")), None)
    full = str(first or path.stem[len("details_"):-len(ts) - 1] or path.stem)
    task, shots = task_and_shots(full)
    results_path = _results_for(path, ts)
    results = _json(results_path) if results_path else {}
    general = results.get("config_general") or {}
    model_cfg = general.get("model_config") or {}
    task_cfg = (results.get("config_tasks") or {}).get(full, {})
    generate = any("GENERATIVE" in (d.get("sampling_methods") or []) for d in docs if d) \
        or not any(resp["logprobs"])
    norms = _normalisations(task_cfg, names)
    samples: list[LogSample] = []
    outcomes: dict[str, tuple[list, list]] = {n: ([], []) for n in names}  # correct, pred
    for i, doc in enumerate(docs):
        sample, raw = _sample(source, i, doc, resp, generate)
        samples.append(sample)
        for name in names:
            value = metrics[name][i]
            value = (value[0] if value else None) if isinstance(value, list) else value
            if not isinstance(value, (int, float)):  # a bool is an int
                raise InputError(f"the row (doc.id {doc.get('id')!r}) has no {name} value",
                                 path=f"{source}#row {i}")
            outcomes[name][0].append(value > 0)
            outcomes[name][1].append(_pred(norms[name], sample.scores, raw, resp, i))
    chat_on, how = _chat(model_cfg, general, resp, docs)
    axes = {"scoring": "generate" if generate else "likelihood",
            "template": _template(task_cfg, model_cfg, samples),
            # the chat template's text is not in the log, its rendering is: the token ids
            # every context and every continuation starts with
            "chat": short_hash(_shared_prefix(resp["input_tokens"]), _shared_prefix(
                c for cs in resp["output_tokens"] for c in cs or []),
                model_cfg.get("system_prompt")) if chat_on else "off"}
    name_in_log = str(general.get("model_name") or model_cfg.get("model_name") or "")
    reported = (results.get("results") or {}).get(full) or {}
    return [LogRun(
        harness=NAME, task=task, metric=name, shots=shots, axes=dict(axes),
        model=model or Path(name_in_log).name or path.parent.parent.name or None,
        source=source, samples=samples, chat=chat_on,
        reported_accuracy=float(reported[name]) if isinstance(reported.get(name), (int, float))
        else None, correct=outcomes[name][0], pred=outcomes[name][1],
        provenance={"harness": NAME, "lighteval_sha": general.get("lighteval_sha"),
                    "model_name": name_in_log, "model_config": model_cfg, "task": full,
                    "results_file": str(results_path) if results_path else None,
                    "details_file": source, "chat_template_from": how,
                    "normalisation": norms[name], "n_shot": shots,
                    "hashes": ((results.get("summary_tasks") or {}).get(full) or {})
                    .get("hashes")}) for name in names]


def _sample(source: str, i: int, doc, resp: dict, generate: bool):
    """(the row's sample, its options as the log shows them: with their leading space)."""
    if not isinstance(doc, dict):
        raise InputError("a row without its doc", path=f"{source}#row {i}")
    raw = [str(c) for c in doc.get("choices") or []]
    lps = resp["logprobs"][i] or []
    gold = (doc.get("gold_index") or [None]) if isinstance(doc.get("gold_index"), list) \
        else [doc.get("gold_index")]
    gold = gold[0] if isinstance(gold[0], int) else None
    spec = doc.get("specific") if isinstance(doc.get("specific"), dict) else {}
    hint = None if spec.get("item_id") is None else str(spec["item_id"])
    text = resp["text"][i]
    query = doc.get("query") if isinstance(doc.get("query"), str) else None
    return LogSample(
        source, f"row {i}", None if doc.get("id") is None else str(doc["id"]), False,
        question=query, choices=tuple(c.lstrip() for c in raw) or None, target=gold,
        raw_output=text[0] if isinstance(text, list) and text and isinstance(text[0], str)
        else None, scores=tuple(float(v) for v in lps[:len(raw)])
        if lps and not generate else None, item_hint=hint, prompt=query,
        doc_item=(hint, spec.get("benchmark"), spec.get("subject"), gold)
        if hint is not None and spec.get("benchmark") and gold is not None else None), raw


def _template(task_cfg: dict, model_cfg: dict, samples: list[LogSample]) -> str:
    if task_cfg:
        return short_hash(*(json.dumps(task_cfg.get(k), sort_keys=True)
                            for k in PROMPT_FIELDS), model_cfg.get("system_prompt"))
    # no results file: the queries' shared start and end, the prompt around each item's text
    queries = [s.prompt or "" for s in samples]
    return short_hash(os.path.commonprefix(queries),
                      os.path.commonprefix([q[::-1] for q in queries])[::-1])


def task_and_shots(full: str) -> tuple[str, int | None]:
    """lighteval >= 0.11 names a task `task|shots` ("fragility_mc|0"), older ones
    `suite|task|shots` or, on their CLI, `suite|task|shots|truncate` ("leaderboard|arc|25|0"):
    the shots are the last all-digit field (after a truncate 0/1), the rest the task."""
    parts = full.split("|")
    if len(parts) >= 4 and parts[-1] in ("0", "1") and parts[-2].isdigit():
        parts = parts[:-1]
    if len(parts) >= 2 and parts[-1].isdigit():
        return "|".join(parts[:-1]), int(parts[-1])
    return full, None


def _load(path: Path):
    """(docs as dicts, {metric: values}, {response field: values}) of a details parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable parquet file ({exc})", path=str(path)) from None
    bad = [c for c in COLUMNS if c not in table.column_names
           or not pa.types.is_struct(table.schema.field(c).type)]
    if bad:
        raise InputError(f"not a lighteval details file: no struct column {', '.join(bad)} "
                         "(lighteval >= 0.11 writes doc, metric and model_response)",
                         path=str(path))

    def fields(column: str, names=None) -> dict[str, list]:
        col = table.column(column).combine_chunks()
        names = names or [col.type.field(k).name for k in range(col.type.num_fields)]
        return {n: col.field(n).to_pylist() if col.type.get_field_index(n) >= 0
                else [None] * len(col) for n in names}

    return (table.column("doc").to_pylist(), fields("metric"),
            fields("model_response", ["logprobs", "text", "input_tokens", "output_tokens",
                                      "unconditioned_logprobs"]))


def _results_for(details: Path, ts: str) -> Path | None:
    """results_<ts>.json in the results/ beside the details/ holding the file, or None."""
    name = f"results_{ts}.json"
    for up in details.parents:
        if up.name == "details":
            direct = up.parent / "results" / details.parent.parent.relative_to(up) / name
            found = [direct] if direct.is_file() else sorted(
                (up.parent / "results").rglob(name))  # another model folder's
            return found[0] if found else None
    return None


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        data = exc
    if not isinstance(data, dict):
        raise InputError(f"not a JSON object ({data})", path=str(path))
    return data


def _normalisations(task_cfg: dict, names: list[str]) -> dict[str, str | None]:
    """How each metric's argmax weighs the log-probabilities, read from the task config's
    `sample_level_fn` repr (e.g. `LoglikelihoodAcc(logprob_normalization=LogProbCharNorm(
    name='norm', ignore_first_space=True))`); without a config, acc_norm is the char norm."""
    fns = {}
    for m in [m for m in task_cfg.get("metrics") or [] if isinstance(m, dict)]:
        for n in m.get("metric_name") if isinstance(m.get("metric_name"), list) \
                else [m.get("metric_name")]:
            fns[n] = str(m.get("sample_level_fn") or "")
    out = {}
    for name in names:
        fn = fns.get(name, "CharNorm(ignore_first_space=True)" if "norm" in name else "")
        out[name] = ("pmi" if "PMINorm" in fn else "token" if "TokenNorm" in fn
                     else "char-first-space" if "ignore_first_space=True" in fn
                     else "char" if "CharNorm" in fn else None)
    return out


def _pred(norm, scores, raw, resp, i) -> int | None:
    """The option the metric's argmax picks, lighteval's normalisation (first maximum)."""
    n = len(raw)
    if not scores or len(scores) != n:
        return None
    values = list(scores)
    if norm == "char-first-space":  # lighteval drops one leading space
        values = [v / max(len(c) - (c[:1] == " "), 1) for v, c in zip(values, raw)]
    elif norm == "char":
        values = [v / max(len(c), 1) for v, c in zip(values, raw)]
    elif norm == "token" and len(resp["output_tokens"][i] or []) >= n:
        values = [v / max(len(t), 1) for v, t in zip(values, resp["output_tokens"][i])]
    elif norm == "pmi":
        lps = resp["logprobs"][i]  # the unconditioned ones follow the n conditioned
        uncond = lps[n:2 * n] if len(lps) == 2 * n else resp["unconditioned_logprobs"][i]
        if not uncond or len(uncond) < n:
            return None
        values = [v - u for v, u in zip(values, uncond)]
    return max(range(n), key=values.__getitem__)


def _chat(model_cfg: dict, general: dict, resp: dict, docs) -> tuple[bool, str]:
    """Whether lighteval applied the chat template and how that is known: the model config's
    override_chat_template, else (null: if the tokenizer has one, which the log does not
    record) the tokens: a chat template gives every context one long header, and the
    whitespace its generation prompt ends in is moved into every continuation. Read from
    the log alone, never from a model folder on this machine (the same log must import the
    same anywhere)."""
    if isinstance(model_cfg.get("override_chat_template"), bool):
        return model_cfg["override_chat_template"], "override_chat_template"
    conts = [c for cs in resp["output_tokens"] for c in cs or []]
    starts = [(d.get("instruction") or "") + ((d.get("fewshot_samples") or [{}])[0] or {})
              .get("query", d.get("query") or "") for d in docs if isinstance(d, dict)]
    plain = len(os.path.commonprefix(starts).encode()) + 2  # + bos and the like
    return (bool(_shared_prefix(conts))
            and len(_shared_prefix(resp["input_tokens"])) > plain), "details tokens"


def _shared_prefix(lists) -> tuple:
    lists = [list(x) for x in lists if x]
    return tuple(os.path.commonprefix(lists)) if lists else ()
