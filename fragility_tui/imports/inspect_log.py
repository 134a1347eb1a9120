"""Inspect AI logs: a `.eval` file (a zip: `header.json` with the task, its args, the plan's
solvers and the generate config; `samples/<id>_epoch_<n>.json`, one per sample and epoch)
or its JSON form (`inspect log convert --to json`: one object with `eval`, `plan`,
`results` and `samples`). One config per scorer (`choice` for multiple choice); a sample's
score value `C` / `I` (or a number) is its correctness. Epochs of one sample are
replicates: each epoch is a config of its own (+eN, axis epoch), never averaged.
With `multiple_choice(shuffle=True)` the log keeps the shuffled options and target only:
samples are matched to items by option text and the order they showed is recorded."""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.imports.records import LogRun, LogSample, short_hash

NAME = "inspect"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def sniff(path: Path) -> bool:
    if path.suffix == ".eval":
        return path.is_file()
    if path.suffix != ".json" or not path.is_file():
        return False
    with open(path, "rb") as fh:
        head = fh.read(4096)
    return b'"eval"' in head and (b'"plan"' in head or b'"version"' in head)


def expand(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted([*path.rglob("*.eval"), *path.rglob("*.json")])
    return [path]


def read(path: Path, *, model: str | None = None, metric: str | None = None) -> list[LogRun]:
    header, samples = _load(path)
    ev = header.get("eval")
    if not isinstance(ev, dict) or "task" not in ev:
        raise InputError("not an Inspect log (no eval.task in its header)", path=str(path))
    if header.get("status") not in (None, "success"):
        raise InputError(f"the log's status is {header.get('status')!r}, not success: its "
                         "samples are not a finished evaluation", path=str(path))
    steps = (header.get("plan") or {}).get("steps") or []
    solvers = [s.get("solver") for s in steps if isinstance(s, dict)]
    params = {s.get("solver"): s.get("params") or {} for s in steps if isinstance(s, dict)}
    mc = params.get("multiple_choice", {})
    generate = (header.get("plan") or {}).get("config") or {}
    passed = ev.get("task_args_passed")
    passed = passed if isinstance(passed, dict) else (ev.get("task_args") or {})
    task = _task_id(str(ev["task"]).rsplit("/", 1)[-1], passed)
    shuffled = bool(mc.get("shuffle")) or any(
        k in SHUFFLE_ARGS and not (v is None or v is False or v in (-1, "-1", "false"))
        for k, v in passed.items())
    reported = _reported(header)
    runs: dict[str, LogRun] = {}
    source = str(path)
    for member, record in samples:
        where = f"{source}#{member}"
        sample_scores = record.get("scores") if isinstance(record, dict) else None
        if not isinstance(sample_scores, dict) or not sample_scores:
            raise InputError("a sample without scores", path=where)
        for scorer, score in sample_scores.items():
            if metric is not None and scorer != metric:
                continue
            run = runs.get(scorer)
            if run is None:
                run = runs[scorer] = LogRun(
                    harness=NAME, task=task, metric=scorer, shots=None,
                    axes={"scoring": "generate", "solver": "+".join(map(str, solvers)) or "none",
                          "shuffle": "on" if shuffled else "off",
                          "template": short_hash(json.dumps(steps, sort_keys=True)),
                          "generate_config": short_hash(json.dumps(generate, sort_keys=True))},
                    model=model or str(ev.get("model", "")).rsplit("/", 1)[-1] or None,
                    source=str(path), reported_accuracy=reported.get(scorer),
                    provenance={"harness": NAME, "inspect_version": (ev.get("packages") or {})
                                .get("inspect_ai"), "model": ev.get("model"),
                                "model_args": ev.get("model_args"),
                                "task_args": ev.get("task_args"), "solvers": steps,
                                "generate_config": generate, "log": str(path),
                                "epochs": (ev.get("config") or {}).get("epochs")})
            run.samples.append(_sample(source, member, record, score))
    if not runs:
        raise InputError(f"no samples scored by {metric!r}" if metric else "no samples",
                         path=str(path))
    return list(runs.values())


SHUFFLE_ARGS = ("shuffle", "shuffle_choices")
NOT_CONFIG_ARGS = ("limit",)  # task args that choose samples, not how they are asked


def _task_id(task: str, args: dict) -> str:
    """The task with the args passed to it (they can change the prompt or the options'
    order: two runs of one task with other args are two configs), e.g.
    `fragility_mc[shuffle_choices=0]`."""
    shown = [f"{k}={json.dumps(v, sort_keys=True, separators=(',', ':'))}"
             for k, v in sorted(args.items()) if k not in NOT_CONFIG_ARGS]
    return f"{task}[{','.join(shown)}]" if shown else task


def _load(path: Path):
    """(header, [(where, sample record)]) of a .eval zip or a JSON log."""
    if path.suffix == ".eval":
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            if "header.json" not in names:
                raise InputError("no header.json in the .eval file: a truncated or unfinished "
                                 "log", path=str(path))
            header = _json(_member(zf, path, "header.json"), f"{path}#header.json")
            samples = [(n, _json(_member(zf, path, n), f"{path}#{n}"))
                       for n in names if n.startswith("samples/") and n.endswith(".json")]
        return header, samples
    doc = _json(path.read_bytes(), str(path))
    if not isinstance(doc, dict):
        raise InputError("not an Inspect log", path=str(path))
    records = doc.get("samples") or []
    return doc, [(f"samples[{k}]", r) for k, r in enumerate(records)]


ZSTD = 93  # the zip compression method Inspect writes its members with


def _member(zf: zipfile.ZipFile, path: Path, name: str) -> bytes:
    """A member's bytes. Inspect compresses members with zstd (zip method 93), which
    Python's zipfile reads only from 3.14: those are decompressed here from the raw bytes."""
    import struct

    info = zf.getinfo(name)
    if info.compress_type != ZSTD:
        return zf.read(name)
    import zstandard

    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise InputError(f"damaged zip member {name}", path=str(path))
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        fh.seek(info.header_offset + 30 + name_len + extra_len)
        raw = fh.read(info.compress_size)
    if len(raw) < info.compress_size:
        raise InputError(f"zip member {name} is cut short: a truncated log", path=str(path))
    try:
        data = zstandard.ZstdDecompressor().decompress(raw, max_output_size=info.file_size)
    except zstandard.ZstdError as exc:
        raise InputError(f"zip member {name} does not decompress ({exc})", path=str(path)) \
            from None
    if zlib.crc32(data) != info.CRC:
        raise InputError(f"zip member {name} fails its checksum", path=str(path))
    return data


def _json(raw: bytes, where: str):
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"invalid JSON ({exc})", path=where) from None


def _reported(header) -> dict[str, float]:
    out = {}
    for score in ((header.get("results") or {}).get("scores") or []):
        accuracy = ((score.get("metrics") or {}).get("accuracy") or {}).get("value")
        if isinstance(accuracy, (int, float)):
            out[score.get("name")] = float(accuracy)
    return out


def _correct(value, where) -> bool:
    if value in ("C", "I"):
        return value == "C"
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value > 0
    raise InputError(f"score value {value!r} is not C / I or a number", path=where)


def _sample(source: str, member: str, record: dict, score) -> LogSample:
    where = f"{source}#{member}"
    if "id" not in record:
        raise InputError("a sample without an id", path=where)
    value = score.get("value") if isinstance(score, dict) else score
    choices = record.get("choices")
    choices = tuple(map(str, choices)) if isinstance(choices, list) and choices else None
    target = record.get("target")
    target = target[0] if isinstance(target, list) and target else target
    target_index = LETTERS.index(target) if isinstance(target, str) and len(target) == 1 \
        and target in LETTERS[:len(choices or ())] else None
    answer = score.get("answer") if isinstance(score, dict) else None
    pred = LETTERS.index(answer) if isinstance(answer, str) and len(answer) == 1 \
        and answer in LETTERS[:len(choices or ())] else None
    output = (record.get("output") or {}).get("completion")
    metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    hint = next((str(metadata[k]) for k in ("item_uid", "uid", "id") if metadata.get(k)), None)
    return LogSample(source, member, str(record["id"]), _correct(value, where),
                     _input_text(record), choices, target_index, pred,
                     output if isinstance(output, str) else None, None, None,
                     int(record.get("epoch") or 1), hint or str(record["id"]), _prompt(record))


def _input_text(record) -> str | None:
    value = record.get("input")
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # chat messages: the user's text
        texts = [m.get("content") for m in value if isinstance(m, dict)
                 and m.get("role") == "user" and isinstance(m.get("content"), str)]
        return "\n".join(texts) or None
    return None


def _prompt(record) -> str | None:
    """What the model was sent: the messages before its answer, as role: text lines."""
    lines = []
    for message in record.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") == "assistant":
            break
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        if isinstance(content, str):
            lines.append(f"{message.get('role')}: {content}")
    return "\n".join(lines) or None
