"""HELM (crfm-helm 0.5.x) run directories: `benchmark_output/runs/<suite>/<run name>/` with
`run_spec.json` (the scenario and its args, the adapter spec: method, prompt parts, shots,
model), `scenario_state.json` (one request state per request: the instance with its input
and references, the prompt, the model's completion, `output_mapping` letter -> reference),
`per_instance_stats.json` (each instance's stats per train trial: `exact_match`,
`predicted_index` for the separate methods) and `stats.json` (HELM's own aggregates).

One run per run directory (and per perturbation, when the run spec augmented its instances);
correctness is the instance's `exact_match`. Train trials (other draws of the in-context
examples) are replicates, imported as epochs (+eN), never averaged. HELM's instance ids are
its own counters (`id5`): they never name an item: instances match items by content (the
option set, then the question). The chat template HELM's Hugging Face client may apply is
not recorded in the run; the separate methods' echoed prompts show it, the joint one's not."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.imports.records import LogRun, LogSample, json_loads, short_hash

NAME = "helm"
RUN_SPEC, SCENARIO_STATE, PER_INSTANCE, STATS = (
    "run_spec.json", "scenario_state.json", "per_instance_stats.json", "stats.json")
FILES = (RUN_SPEC, SCENARIO_STATE, PER_INSTANCE)
METRIC = "exact_match"
# HELM's adapter methods (helm/benchmark/adaptation/adapter_spec.py) -> our scoring axis:
# joint methods show the lettered options in one prompt and take the generated letter
# (output_mapping maps it back); the separate ones score each reference's continuation:
# original by its log-probability per token, calibrated by it minus the reference's
# log-probability after "Answer:" alone (basic_metrics.py, evaluate_references).
SCORING = {"multiple_choice_joint": "generate",
           "multiple_choice_joint_chain_of_thought": "generate",
           "multiple_choice_joint_multimodal": "generate",
           "generation": "generate", "generation_multimodal": "generate", "chat": "generate",
           "multiple_choice_separate_original": "likelihood",
           "multiple_choice_separate_calibrated": "likelihood"}
SEPARATE = ("multiple_choice_separate_original", "multiple_choice_separate_calibrated")
# run spec args that are the model, the sample size or the shots (an axis of their own),
# not how an instance is asked
NOT_TASK_ARGS = ("model", "model_deployment", "max_train_instances", "max_eval_instances",
                 "num_train_trials", "num_trials")
# the adapter spec's fields that make the prompt and the decoding
TEMPLATE_FIELDS = ("global_prefix", "global_suffix", "instructions", "input_prefix",
                   "input_suffix", "reference_prefix", "reference_suffix",
                   "reference_prefix_characters", "chain_of_thought_prefix",
                   "chain_of_thought_suffix", "output_prefix", "output_suffix",
                   "instance_prefix", "substitutions", "multi_label", "sample_train",
                   "temperature", "max_tokens", "stop_sequences", "num_outputs", "random",
                   "output_mapping_pattern")


def sniff(path: Path) -> bool:
    """A run directory (a folder holding run_spec.json, scenario_state.json or
    per_instance_stats.json), or one of those files."""
    if path.is_dir():
        return any((path / name).is_file() for name in FILES)
    return path.is_file() and path.name in FILES


def expand(path: Path) -> list[Path]:
    """The run directories of a path: itself, the one a HELM file is in, or every run
    directory under a folder (benchmark_output/runs/<suite>/ or above)."""
    if path.is_dir():
        if sniff(path):
            return [path]
        return sorted({p.parent for name in FILES for p in path.rglob(name) if p.is_file()})
    return [path.parent] if path.name in FILES else [path]


def read(path: Path, *, model: str | None = None, metric: str | None = None) -> list[LogRun]:
    run_dir = path if path.is_dir() else path.parent
    metric = metric or METRIC
    spec_path = run_dir / RUN_SPEC
    spec = _json(spec_path, dict) if spec_path.is_file() else {}
    state_path, stats_path = _required(run_dir, SCENARIO_STATE), _required(run_dir, PER_INSTANCE)
    state = _json(state_path, dict)
    per_instance = _json(stats_path, list)
    adapter = spec.get("adapter_spec") if isinstance(spec.get("adapter_spec"), dict) \
        else state.get("adapter_spec") if isinstance(state.get("adapter_spec"), dict) else {}
    method = str(adapter.get("method") or "")
    requests = _request_states(state, state_path)
    stats_source = str(stats_path)
    groups: dict[str | None, list[LogSample]] = {}
    values: dict[str | None, list[float]] = {}
    splits: dict[str | None, dict[str, int]] = {}
    shown_shots: set[int] = set()
    chat_headers: set[str | None] = set()
    for k, entry in enumerate(per_instance):
        iid, trial, perturbation = _key(entry, f"{stats_source}#{k}")
        where = f"{stats_source}#{iid}"
        states = requests.get((iid, perturbation, trial))
        if not states:
            raise InputError(f"instance {iid} (train trial {trial}) has stats but no request "
                             f"state in {state_path}", path=where, field="instance_id")
        value, pred_index, available = _stats(entry, metric, where)
        if value is None:
            raise InputError(f"instance {iid} (train trial {trial}) has no {metric} stat "
                             f"(it has {', '.join(available) or 'none'})", path=where)
        sample, split = _sample(stats_source, iid, trial, states, adapter, value, pred_index,
                                where)
        shown_shots.update(s.get("num_train_instances") for s in states  # not calibration's
                           if isinstance(s.get("num_train_instances"), int)
                           and s.get("request_mode") in (None, "original"))
        if method in SEPARATE:
            chat_headers.add(_chat_header(states))
        groups.setdefault(perturbation, []).append(sample)
        values.setdefault(perturbation, []).append(value)
        counts = splits.setdefault(perturbation, {})
        counts[split] = counts.get(split, 0) + 1
    if not groups:
        raise InputError("no instances in per_instance_stats.json", path=stats_source)
    shots = shown_shots.pop() if len(shown_shots) == 1 else \
        adapter.get("max_train_instances") if isinstance(adapter.get("max_train_instances"),
                                                         int) else None
    # None: not recorded (no echo); []: no template; else the headers seen
    chat = None if not chat_headers or None in chat_headers else sorted(chat_headers - {""})
    aggregates = _aggregates(run_dir / STATS, metric)
    model_name = str(adapter.get("model") or adapter.get("model_deployment") or "")
    scenario, args = _task(spec, run_dir, method)
    runs = []
    names = _perturbation_names(list(groups))
    for key, samples in groups.items():
        name = names[key]
        axes = {"scoring": SCORING.get(method, "unknown"), "method": method or "unknown",
                "template": short_hash(*(json.dumps(adapter.get(f), sort_keys=True)
                                         for f in TEMPLATE_FIELDS)),
                # separate methods echo the prompt the model was given: a header before
                # HELM's own prompt is the chat template the client applied
                "chat": "unknown" if chat is None else
                (short_hash(*chat) if chat else "off")}
        if name is not None:  # HELM's data augmentation: its own config
            axes["perturbation"] = name
        runs.append(LogRun(
            harness=NAME, task=_task_id(scenario, [*args, *(
                [f"perturbation={name}"] if name is not None else [])]),
            metric=metric, shots=shots, axes=axes,
            model=model or model_name.rsplit("/", 1)[-1] or None, source=str(run_dir),
            samples=samples, chat=bool(chat),
            reported_accuracy=_reported(aggregates, splits[key], values[key], name),
            provenance={"harness": NAME, "run_spec": spec.get("name"), "method": method,
                        "model": adapter.get("model"),
                        "model_deployment": adapter.get("model_deployment"),
                        "scenario_spec": spec.get("scenario_spec"), "adapter_spec": adapter,
                        "max_train_instances": adapter.get("max_train_instances"),
                        "train_trials": len({s.epoch for s in samples}),
                        "run_dir": str(run_dir),
                        "perturbation": None if key is None else json.loads(key)}))
    return runs


def _required(run_dir: Path, name: str) -> Path:
    path = run_dir / name
    if not path.is_file():
        raise InputError(f"no {name} in the HELM run directory (HELM writes it when the run "
                         "finishes: an unfinished or partly copied run?)", path=str(path))
    return path


def _json(path: Path, kind: type):
    try:
        data = json_loads()(path.read_bytes())
    except (ValueError, RecursionError) as exc:
        raise InputError(f"invalid JSON ({type(exc).__name__}: {str(exc)[:200]})",
                         path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read it ({exc.strerror or exc})", path=str(path)) from None
    if not isinstance(data, kind):
        raise InputError(f"not HELM's {path.name} (a JSON {kind.__name__} expected)",
                         path=str(path))
    return data


def _perturbation_key(value) -> str | None:
    return None if not value else json.dumps(value, sort_keys=True)


def _perturbation_names(keys: list[str | None]) -> dict[str | None, str | None]:
    """Each perturbation's name (HELM's description's `name`), with a hash of the whole
    description where two descriptions share a name (typos at two probabilities)."""
    names = {}
    for key in keys:
        described = json.loads(key) if key is not None else None
        names[key] = None if key is None else str(described.get("name") or "perturbed") \
            if isinstance(described, dict) else "perturbed"
    for key, name in names.items():
        if name is not None and list(names.values()).count(name) > 1:
            names[key] = f"{name}~{short_hash(key)[:6]}"
    return names


def _key(entry, where: str) -> tuple[str, int, str | None]:
    """(instance id, train trial, perturbation) of a per-instance stats entry."""
    if not isinstance(entry, dict) or not isinstance(entry.get("instance_id"), str) \
            or not isinstance(entry.get("stats"), list):
        raise InputError("not a per-instance stats entry (instance_id and stats expected)",
                         path=where)
    trial = entry.get("train_trial_index", 0)
    if not isinstance(trial, int) or isinstance(trial, bool):
        raise InputError(f"train_trial_index {trial!r} is not a number",
                         path=f"{where.rpartition('#')[0]}#{entry['instance_id']}")
    return entry["instance_id"], trial, _perturbation_key(entry.get("perturbation"))


def _request_states(state: dict, path: Path) -> dict[tuple, list[dict]]:
    """The request states by (instance id, perturbation, train trial)."""
    states = state.get("request_states")
    if not isinstance(states, list):
        raise InputError("not HELM's scenario_state.json (no request_states list)",
                         path=str(path))
    out: dict[tuple, list[dict]] = {}
    for k, rs in enumerate(states):
        instance = rs.get("instance") if isinstance(rs, dict) else None
        if not isinstance(instance, dict) or not isinstance(instance.get("id"), str):
            raise InputError("a request state without its instance (and the instance's id)",
                             path=f"{path}#request_states[{k}]")
        trial = rs.get("train_trial_index", 0)
        key = (instance["id"], _perturbation_key(instance.get("perturbation")), trial)
        out.setdefault(key, []).append(rs)
    return out


def _stats(entry: dict, metric: str, where: str):
    """(the metric's value, predicted_index or None, the stat names there are)."""
    value = pred = None
    names = []
    for stat in entry["stats"]:
        name = stat.get("name") if isinstance(stat, dict) else None
        if not isinstance(name, dict):
            raise InputError("a stat without its name", path=where)
        names.append(str(name.get("name")))
        mean = stat.get("mean")
        if mean is None and stat.get("count"):
            mean = stat.get("sum", 0) / stat["count"]
        if not isinstance(mean, (int, float)) or isinstance(mean, bool):
            continue
        if name.get("name") == metric:
            value = float(mean)
        elif name.get("name") == "predicted_index":
            pred = int(mean)
    return value, pred, sorted(set(names))


def _text(obj) -> str | None:
    """The text of an Input / Output object (`{"text": ...}`)."""
    return obj.get("text") if isinstance(obj, dict) and isinstance(obj.get("text"), str) \
        else None


def _sample(source: str, iid: str, trial: int, states: list[dict], adapter: dict,
            value: float, pred_index: int | None, where: str) -> tuple[LogSample, str]:
    """The instance's sample (options in the order the prompt showed them) and its split."""
    method = str(adapter.get("method") or "")
    first = states[0]
    instance = first["instance"]
    refs = instance.get("references")
    if not isinstance(refs, list) or not all(_text(r.get("output") if isinstance(r, dict)
                                                   else None) is not None for r in refs):
        raise InputError(f"instance {iid}'s references are not HELM references (output.text)",
                         path=where)
    texts = [_text(r["output"]) for r in refs]
    correct_texts = [t for t, r in zip(texts, refs) if "correct" in (r.get("tags") or [])]
    mapping = first.get("output_mapping") if isinstance(first.get("output_mapping"), dict) \
        else None
    # the joint prompt lists the references under the mapping's letters, in its order
    shown = [str(v) for v in mapping.values()] if mapping and sorted(
        map(str, mapping.values())) == sorted(texts) else texts
    target = next((k for k, t in enumerate(shown) if t in correct_texts), None)
    output = None
    pred = None
    completions = ((first.get("result") or {}).get("completions") or []) \
        if method not in SEPARATE else []
    if completions and isinstance(completions[0], dict):
        output = completions[0].get("text") if isinstance(completions[0].get("text"),
                                                          str) else None
    if method in SEPARATE:
        pred = pred_index if pred_index is not None and 0 <= pred_index < len(shown) \
            else None
        originals = [s for s in states if s.get("request_mode") in (None, "original")]
        originals.sort(key=lambda s: s.get("reference_index") or 0)
        prompt = "\n\n".join(p for p in (_prompt(s) for s in originals) if p) or None
    else:
        if output is not None and mapping:  # the letter read as HELM's metric reads it
            mapped = mapping.get(_answer(output, adapter.get("output_mapping_pattern")))
            pred = shown.index(mapped) if mapped in shown else None
        prompt = _prompt(first)
    # a tie of the separate methods' scores gives a fraction: HELM's prediction decides
    correct = value >= 1 or (0 < value < 1 and (pred == target if pred is not None
                                                else value >= 0.5))
    line = iid if trial == 0 else f"{iid} trial {trial}"
    return LogSample(source, line, None, bool(correct), question=_text(instance.get("input")),
                     choices=tuple(shown) or None, target=target, pred=pred,
                     raw_output=output, epoch=trial + 1, prompt=prompt), \
        str(instance.get("split") or "test")


def _answer(output: str, pattern) -> str:
    """evaluate_reference_metrics.py: the stripped completion, through the adapter's
    output_mapping_pattern when it has one (its first group, else the match)."""
    text = output.strip()
    if not isinstance(pattern, str) or not pattern:
        return text
    try:
        found = re.search(pattern, text)
    except re.error:
        return text
    return "" if found is None else found.group(1) if found.groups() else found.group(0)


def _prompt(rs: dict) -> str | None:
    request = rs.get("request") if isinstance(rs.get("request"), dict) else {}
    prompt = request.get("prompt")
    if isinstance(prompt, str) and prompt:
        return prompt
    messages = request.get("messages")
    if isinstance(messages, list):
        lines = [f"{m.get('role')}: {m.get('content')}" for m in messages
                 if isinstance(m, dict) and isinstance(m.get("content"), str)]
        return "\n".join(lines) or None
    return None


def _chat_header(states: list[dict]) -> str | None:
    """What the model was given around HELM's prompt, read from an echoed completion (a
    chat template's header and the assistant turn's start); "" when the echo is the prompt
    itself, None when no request echoes its prompt."""
    for rs in states:
        prompt = _prompt(rs)
        completions = (rs.get("result") or {}).get("completions") or []
        echoed = completions[0].get("text") if completions and isinstance(
            completions[0], dict) else None
        if isinstance(prompt, str) and isinstance(echoed, str) and prompt in echoed:
            at = echoed.index(prompt)
            before, after = echoed[:at], echoed[at + len(prompt):]
            return before + "\x1f" + after if before or after.strip() else ""
    return None


def _task(spec: dict, run_dir: Path, method: str) -> tuple[str, list[str]]:
    """The scenario and the run spec args that change how it is asked: HELM's own run name
    without the model, the sample size and the shots (`mmlu`, [`subject=anatomy`,
    `method=multiple_choice_joint`]); the method is always there."""
    name = str(spec.get("name") or run_dir.name)
    scenario, _, rest = name.partition(":")
    args = [a for a in rest.split(",") if a] if rest else []
    if not args:
        scenario_args = (spec.get("scenario_spec") or {}).get("args") or {}
        args = [f"{k}={v}" for k, v in sorted(scenario_args.items())]
    kept = [a for a in args if a.partition("=")[0] not in NOT_TASK_ARGS]
    if method and not any(a.startswith("method=") for a in kept):
        kept.append(f"method={method}")
    return scenario, kept


def _task_id(scenario: str, args: list[str]) -> str:
    return f"{scenario}[{','.join(args)}]" if args else scenario


def _aggregates(path: Path, metric: str) -> dict[str, float]:
    """stats.json's value of the metric per split (no perturbation, no sub-split)."""
    if not path.is_file():
        return {}
    out = {}
    for stat in _json(path, list):
        name = stat.get("name") if isinstance(stat, dict) else None
        if isinstance(name, dict) and name.get("name") == metric and not \
                name.get("perturbation") and not name.get("sub_split") and \
                isinstance(stat.get("mean"), (int, float)):
            out[str(name.get("split"))] = float(stat["mean"])
    return out


def _reported(aggregates: dict, splits: dict[str, int], values: list[float],
              perturbation: str | None) -> float:
    """The log's own accuracy: HELM's aggregate in stats.json (per split, weighted by the
    split's instances), else the mean of the instances' values."""
    if perturbation is None and aggregates and all(s in aggregates for s in splits):
        n = sum(splits.values())
        return sum(aggregates[s] * k for s, k in splits.items()) / n
    return sum(values) / len(values)
