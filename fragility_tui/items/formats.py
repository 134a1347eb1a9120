"""The item formats people have on disk (our normalised JSONL, ARC, HellaSwag, MMLU,
TruthfulQA, generic CSV/JSON/Parquet): one converter per format from a row to a `RawItem`,
format detection, and reading a file, a set of shards or a folder. docs/items.md documents
formats, detection, ids and exclusion reasons.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from itertools import chain
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.items.rows import (FORMATS, FileContext, ITEM_SUFFIXES, LETTERS,
                                          MMLU_FILE, MMLU_HEADER, Row, arc_benchmark_from_path,
                                          benchmark_of, benchmark_from_path, check_choices, check_size,
                                          check_gold, csv_records, gold_index, json_array_rows,
                                          jsonl_rows, need, need_str, parquet_rows, read_text,
                                          record_id, required_id, split_from_name, subject_of,
                                          type_name)
from fragility_tui.items.item import LoadReport, RawItem

# ---------------------------------------------------------------- converters, one per format


def _from_normalized(ctx: FileContext, row: Row) -> RawItem:
    rec = row.data
    question = need_str(ctx, row, rec, "question")
    choices = check_choices(ctx, row, need(ctx, row, rec, "choices"), "choices")
    if rec.get("gold") is None:
        raise ctx.fail("missing gold answer", row, "gold")
    gold = rec["gold"]
    if isinstance(gold, bool) or not isinstance(gold, int):
        raise ctx.fail(f"gold must be a 0-based integer, got {type_name(gold)}", row, "gold")
    check_gold(ctx, row, gold, len(choices), "gold")
    return RawItem(record_id(ctx, row, rec, "id", f"{row.index:05d}"),
                   benchmark_of(ctx, row, rec.get("benchmark"), benchmark_from_path(ctx.path)),
                   subject_of(ctx, row, rec.get("subject"), "subject"), question, choices, gold,
                   f"{ctx.path}:{row.line}")


def _from_arc(ctx: FileContext, row: Row) -> RawItem:
    """Original ARC JSONL (question.stem, question.choices[{text,label}]) or the Hugging Face
    layout (question string, choices {text: [...], label: [...]}); gold = the position of
    answerKey among the labels (A-E or 1-5), as in our normalised files."""
    rec = row.data
    if isinstance(rec.get("question"), dict):
        stem = need_str(ctx, row, rec["question"], "stem", "question.stem")
        options = need(ctx, row, rec["question"], "choices", "question.choices")
        if not isinstance(options, list) or not all(isinstance(o, dict) for o in options):
            raise ctx.fail("must be a list of {text, label} objects", row, "question.choices")
        texts = [o.get("text") for o in options]
        labels = [o.get("label") for o in options]
        where = "question.choices"
    else:
        stem = need_str(ctx, row, rec, "question")
        options = need(ctx, row, rec, "choices")
        if not isinstance(options, dict) or "text" not in options or "label" not in options:
            raise ctx.fail("must be an object with 'text' and 'label' lists", row, "choices")
        texts, labels, where = options["text"], options["label"], "choices"
    choices = check_choices(ctx, row, texts, where)
    if not isinstance(labels, list) or len(labels) != len(choices) or any(
            isinstance(x, bool) or not isinstance(x, (str, int)) for x in labels):
        raise ctx.fail("every option needs a label (A-E or 1-5)", row, where)
    labels = [str(x).strip() for x in labels]
    if len(set(labels)) != len(labels):
        raise ctx.fail(f"option labels repeat: {', '.join(labels)}", row, where)
    answer = rec.get("answerKey")
    if answer is None or str(answer).strip() == "":
        raise ctx.fail("missing gold answer", row, "answerKey")
    if str(answer).strip() not in labels:
        raise ctx.fail(f"gold {answer!r} is not one of the option labels {', '.join(labels)}",
                       row, "answerKey")
    return RawItem(required_id(ctx, row, rec),
                   benchmark_of(ctx, row, rec.get("benchmark"), arc_benchmark_from_path(ctx.path)),
                   None, stem, choices, labels.index(str(answer).strip()), f"{ctx.path}:{row.line}")


def _from_hellaswag(ctx: FileContext, row: Row) -> RawItem:
    """Native HellaSwag rows (JSONL or the Hugging Face Parquet): the question is `ctx`, or
    ctx_a + " " + ctx_b when ctx is absent; ids are hellaswag_<split>_<0-based row>."""
    rec = row.data
    choices = check_choices(ctx, row, need(ctx, row, rec, "endings"), "endings")
    if rec.get("label") is None or rec.get("label") == "":
        raise ctx.fail("missing gold answer (HellaSwag's test split has no labels; use the "
                       "validation split)", row, "label")
    gold = gold_index(ctx, row, rec.get("label"), len(choices), "label", letters=False)
    if isinstance(rec.get("ctx"), str) and rec["ctx"].strip():
        question = rec["ctx"]
    else:
        ctx_a = need_str(ctx, row, rec, "ctx_a", "ctx")
        ctx_b = rec.get("ctx_b") or ""
        if not isinstance(ctx_b, str):
            raise ctx.fail(f"must be a string, got {type_name(ctx_b)}", row, "ctx_b")
        question = f"{ctx_a} {ctx_b}" if ctx_b else ctx_a
    return RawItem(f"hellaswag_{_hellaswag_split(ctx, rec)}_{row.index:05d}",
                   benchmark_of(ctx, row, rec.get("benchmark"), "hellaswag"),
                   subject_of(ctx, row, rec.get("activity_label"), "activity_label"),
                   question, choices, gold, f"{ctx.path}:{row.line}")


def _hellaswag_split(ctx: FileContext, rec: dict) -> str:
    """The row's own `split` field (HellaSwag writes "val"), else the hint or the file name."""
    split = rec.get("split")
    if isinstance(split, str) and split.strip():
        return {"validation": "val"}.get(split.strip(), split.strip())
    return ctx.split or split_from_name(ctx.path) or "val"


def _mmlu_names(ctx: FileContext, row: Row, subject: str | None) -> tuple[str, str]:
    """(subject, split) from the record, else the <subject>_<split>.csv file name."""
    match = MMLU_FILE.match(ctx.path.name)
    subject = subject or (match["subject"] if match else None)
    if not subject:
        raise ctx.fail("missing MMLU subject: name the file <subject>_test.csv or add a "
                       "'subject' column", row, "subject")
    split = ctx.split or (match["split"] if match else None) or split_from_name(ctx.path) or "test"
    return subject, split


def _from_mmlu(ctx: FileContext, row: Row) -> RawItem:
    """MMLU rows: a headerless CSV row (question, A, B, C, D, letter answer), a row of the
    Hugging Face export CSV (question, choice0..3, numeric answer), or a cais/mmlu Parquet row
    (question, subject, choices, answer). ids: mmlu_<split>/<subject>/<row within subject>."""
    rec = row.data
    if isinstance(rec, list):
        if len(rec) != 6:
            raise ctx.fail(f"expected 6 columns (question, 4 options, answer), got {len(rec)}",
                           row, "columns")
        question, choices = rec[0], tuple(rec[1:5])
        letters = ctx.header is None  # the authors' files: letters; the HF export: 0..3
        answer = rec[5].strip()
        if answer and (answer.isalpha() != letters or len(answer) != 1):
            raise ctx.fail(f"answer {rec[5]!r} must be {'a letter A-D' if letters else '0..3'}",
                           row, "answer")
        gold = gold_index(ctx, row, answer, 4, "answer", letters=letters)
        subject_value = None
    else:
        question = need_str(ctx, row, rec, "question")
        choices = check_choices(ctx, row, need(ctx, row, rec, "choices"), "choices")
        gold = gold_index(ctx, row, rec.get("answer"), len(choices), "answer")
        subject_value = subject_of(ctx, row, rec.get("subject"), "subject")
    subject, split = _mmlu_names(ctx, row, subject_value)
    n = ctx.counters.get(subject, 0)
    ctx.counters[subject] = n + 1
    return RawItem(f"mmlu_{split}/{subject}/{n:04d}", benchmark_of(ctx, row, None, "mmlu"),
                   subject, question, choices, gold, f"{ctx.path}:{row.line}")


def _from_truthfulqa(ctx: FileContext, row: Row) -> RawItem:
    """TruthfulQA MC1: `mc_task.json` ({answer: 0/1} in key order, duplicates kept) or the
    Hugging Face Parquet ({choices: [...], labels: [...]}). Gold = the one answer marked 1."""
    rec = row.data
    question = need_str(ctx, row, rec, "question")
    targets = need(ctx, row, rec, "mc1_targets")
    if isinstance(targets, dict) and set(targets) == {"choices", "labels"}:
        texts, marks = targets["choices"], targets["labels"]
    elif isinstance(targets, dict):
        pairs = getattr(targets, "pairs", list(targets.items()))
        texts, marks = [k for k, _ in pairs], [v for _, v in pairs]
    else:
        raise ctx.fail(f"must be an object of answer: 0/1, got {type_name(targets)}", row,
                       "mc1_targets")
    choices = check_choices(ctx, row, texts, "mc1_targets")
    if not isinstance(marks, list) or len(marks) != len(choices) or any(
            isinstance(m, bool) or m not in (0, 1) for m in marks):
        raise ctx.fail("every answer must be marked 0 or 1", row, "mc1_targets")
    if marks.count(1) != 1:
        raise ctx.fail(f"{marks.count(1)} answers are marked correct; MC1 needs exactly one "
                       "(missing or ambiguous gold)", row, "mc1_targets")
    return RawItem(f"truthfulqa_{row.index:03d}", benchmark_of(ctx, row, rec.get("benchmark"), "truthfulqa"),
                   None, question, choices, marks.index(1), f"{ctx.path}:{row.line}")


def _generic_choices(ctx: FileContext, row: Row, rec: dict) -> tuple[str, ...]:
    """`choices` (a list, a JSON list string, or text split on '|'), else option columns
    choice0..choiceN or A, B, C, ...; empty trailing option cells mean "no such option"."""
    if "choices" in rec:
        value = rec["choices"]
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ctx.fail(f"not a valid JSON list ({exc.msg})", row, "choices") from None
            else:
                value = value.split("|")
        return check_choices(ctx, row, value, "choices")
    columns = _option_columns(rec)
    values = [rec[c] for c in columns]
    while values and (values[-1] is None or (isinstance(values[-1], str) and not values[-1].strip())):
        values.pop()
    return check_choices(ctx, row, ["" if v is None else v for v in values], columns[0] + "..")


def _option_columns(rec: dict) -> list[str]:
    numbered = []
    while f"choice{len(numbered)}" in rec:
        numbered.append(f"choice{len(numbered)}")
    lettered = []
    while len(lettered) < len(LETTERS) and LETTERS[len(lettered)] in rec:
        lettered.append(LETTERS[len(lettered)])
    return numbered or lettered


def _from_generic(ctx: FileContext, row: Row) -> RawItem:
    rec = row.data
    question = need_str(ctx, row, rec, "question")
    choices = _generic_choices(ctx, row, rec)
    gold_key = "gold" if "gold" in rec else "answer"
    gold = gold_index(ctx, row, rec.get(gold_key), len(choices), gold_key)
    return RawItem(record_id(ctx, row, rec, "id", f"{row.index:05d}"),
                   benchmark_of(ctx, row, rec.get("benchmark"), benchmark_from_path(ctx.path)),
                   subject_of(ctx, row, rec.get("subject"), "subject"), question, choices, gold,
                   f"{ctx.path}:{row.line}")


CONVERTERS: dict[str, Callable[[FileContext, Row], RawItem]] = {
    "normalized": _from_normalized, "arc": _from_arc, "hellaswag": _from_hellaswag,
    "mmlu": _from_mmlu, "truthfulqa": _from_truthfulqa, "generic": _from_generic,
}


# ---------------------------------------------------------------- detection and reading


def _format_of_record(rec: dict) -> str:
    if "mc1_targets" in rec:
        return "truthfulqa"
    if "answerKey" in rec or isinstance(rec.get("question"), dict):
        return "arc"
    if "endings" in rec:
        return "hellaswag"
    if "gold" not in rec and ("answer" in rec or _option_columns(rec)):
        return "generic"  # JSON records shaped like a generic table (answer, A..D columns)
    return "normalized"


def _check_columns(ctx: FileContext, columns: list[str], fmt: str) -> None:
    """Header-level checks, so a missing column is one error on the header line."""
    missing = []
    if "question" not in columns:
        missing.append("question")
    if fmt == "generic":
        if "choices" not in columns and not _option_columns(dict.fromkeys(columns)):
            missing.append("choices (or choice0..choiceN, or A, B, C, D)")
        if "gold" not in columns and "answer" not in columns:
            missing.append("gold (or answer)")
    if missing:
        raise InputError(f"missing column(s): {'; '.join(missing)} (columns found: "
                         f"{', '.join(columns) or 'none'})", path=str(ctx.path), line=1,
                         field=missing[0].split(" ")[0])


def _csv_rows(ctx: FileContext, text: str, fmt: str | None) -> tuple[str, Iterator[Row]]:
    records = csv_records(ctx, text)
    first = next(records, None)
    if first is None:
        raise ctx.fail("empty file: no items")
    line, fields = first
    names = [f.strip() for f in fields]
    mmlu_named = MMLU_FILE.match(ctx.path.name) is not None
    if fmt is None:
        if mmlu_named and ([n.lower() for n in names] == MMLU_HEADER
                           or (len(fields) == 6 and fields[5].strip().upper() in ("A", "B", "C", "D"))):
            fmt = "mmlu"
        elif "question" in [n.lower() for n in names]:
            fmt = "generic"
        else:
            raise InputError("cannot tell the format: not an MMLU subject CSV "
                             "(<subject>_test.csv, no header, letter answers) and no 'question' "
                             "column in the header; pass fmt=", path=str(ctx.path), line=line)
    has_header = fmt != "mmlu" or [n.lower() for n in names] == MMLU_HEADER
    if fmt == "mmlu":
        ctx.header = names if has_header else None
        head = [] if has_header else [first]
        return fmt, (Row(f, ln, i) for i, (ln, f) in enumerate(chain(head, records)))
    if fmt not in ("generic", "normalized"):
        raise ctx.fail(f"format {fmt!r} is not read from CSV")
    header = [_column_name(n) for n in names]
    if len(set(header)) != len(header):
        raise InputError("duplicate column names in the header", path=str(ctx.path), line=line)
    _check_columns(ctx, header, "generic")
    return "generic", _csv_dict_rows(ctx, header, records)


def _column_name(name: str) -> str:
    """Known column names match case-insensitively; one-letter option columns are A, B, ..."""
    low = name.lower()
    if low in ("question", "choices", "gold", "answer", "id", "benchmark", "subject") or \
            re.fullmatch(r"choice\d+", low):
        return low
    return name.upper() if len(name) == 1 and name.isalpha() else name


def _csv_dict_rows(ctx: FileContext, header: list[str], records) -> Iterator[Row]:
    for index, (line, fields) in enumerate(records):
        if len(fields) != len(header):
            raise InputError(f"expected {len(header)} columns as in the header, got {len(fields)}",
                             path=str(ctx.path), line=line)
        yield Row(dict(zip(header, fields)), line, index)


def _json_rows(ctx: FileContext, text: str, fmt: str | None) -> tuple[str, Iterator[Row]]:
    array = text.lstrip().startswith("[")
    if not array and "\n" in text.strip() and _is_one_json_value(text):
        raise ctx.fail("one JSON object spanning several lines: expected a JSON array of "
                       "records or one JSON object per line (JSONL)")
    rows = json_array_rows(ctx, text) if array else jsonl_rows(ctx, text)
    first = next(rows, None)
    if first is None:
        raise ctx.fail("empty file: no items")
    return fmt or _format_of_record(first.data), chain([first], rows)


def _is_one_json_value(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _parquet_format(ctx: FileContext, rows: Iterator[Row], fmt: str | None) -> tuple[str, Iterator[Row]]:
    first = next(rows)
    if fmt is None:
        fmt = _format_of_record(first.data)
        if fmt == "normalized":  # a table: the generic reader covers our schema too
            looks_mmlu = {"question", "subject", "choices", "answer"} <= set(first.data)
            fmt = "mmlu" if looks_mmlu and "mmlu" in str(ctx.path).lower() else "generic"
    rows = chain([first], rows)
    if fmt == "generic":
        names = {name: _column_name(name) for name in first.data}
        _check_columns(ctx, list(names.values()), "generic")
        rows = (Row({names[k]: v for k, v in row.data.items()}, row.line, row.index) for row in rows)
    return fmt, rows


def read_file(path: str | os.PathLike, *, fmt: str | None = None, benchmark: str | None = None,
              split: str | None = None) -> tuple[list[RawItem], LoadReport]:
    """Read one item file into raw items (before four-option assembly). `fmt` overrides the
    detection (one of FORMATS); `split` is a hint for the ids of HellaSwag and MMLU."""
    return read_shards([path], fmt=fmt, benchmark=benchmark, split=split)


def read_shards(paths: list[str | os.PathLike], *, fmt: str | None = None,
                benchmark: str | None = None, split: str | None = None,
                ) -> tuple[list[RawItem], LoadReport]:
    """Files that together hold one table (a hub split in several Parquet shards): positional
    ids continue from one file to the next."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown item format {fmt!r}; known: {', '.join(FORMATS)}", field="fmt")
    ctx = FileContext(Path(paths[0]), benchmark=benchmark, split=split)
    raws: list[RawItem] = []
    for path in paths:
        ctx.path, ctx.header, first_index = Path(path), None, len(raws)
        convert, rows = _open(ctx, fmt)
        for row in rows:
            row.index += first_index
            raws.append(check_size(ctx, row, convert(ctx, row)))
    check_unique(raws)
    return raws, LoadReport(", ".join(str(p) for p in paths), read=len(raws))


def _open(ctx: FileContext, fmt: str | None) -> tuple[Callable[[FileContext, Row], RawItem], Iterator[Row]]:
    """The converter and the rows of ctx.path, by extension and (unless `fmt`) content."""
    suffix = ctx.path.suffix.lower()
    if suffix == ".parquet":
        fmt, rows = _parquet_format(ctx, parquet_rows(ctx), fmt)
    elif suffix in (".jsonl", ".ndjson", ".json"):
        fmt, rows = _json_rows(ctx, read_text(ctx.path), fmt)
    elif suffix == ".csv":
        fmt, rows = _csv_rows(ctx, read_text(ctx.path), fmt)
    else:
        raise InputError(f"unsupported item file type {suffix or '(none)'!r}; supported: "
                         f"{', '.join(ITEM_SUFFIXES)}", path=str(ctx.path))
    return CONVERTERS[fmt], rows


def check_unique(raws: list[RawItem], seen: dict[str, str] | None = None) -> dict[str, str]:
    """item_uid -> where, raising on the first repeat (within a file or across files)."""
    seen = {} if seen is None else seen
    for raw in raws:
        uid = f"{raw.benchmark}/{raw.source_id}"
        if uid in seen:
            path, _, line = raw.where.rpartition(":")
            raise InputError(f"duplicate item id {raw.source_id!r} (item {uid!r} first read "
                             f"at {seen[uid]})", path=path, line=int(line) if line.isdigit() else None,
                             field="id")
        seen[uid] = raw.where
    return seen


def read_folder(folder: Path, *, fmt: str | None = None,
                benchmark: str | None = None) -> tuple[list[RawItem], LoadReport]:
    """Every item file directly in `folder` (sorted by name; subfolders are not searched)."""
    files = sorted(p for p in folder.iterdir()
                   if p.is_file() and p.suffix.lower() in ITEM_SUFFIXES)
    if not files:
        raise InputError(f"no item files ({', '.join(ITEM_SUFFIXES)}) in this folder; "
                         "subfolders are not searched", path=str(folder))
    raws: list[RawItem] = []
    sources: dict[str, list[str]] = {}  # benchmark -> the files it was read from
    for file in files:
        file_raws, _ = read_file(file, fmt=fmt, benchmark=benchmark)
        raws += file_raws
        for name in dict.fromkeys(r.benchmark for r in file_raws):
            sources.setdefault(name, []).append(_with_split(file.name))
    check_unique(raws)
    report = LoadReport(str(folder), read=len(raws), files=[_with_split(f.name) for f in files])
    report.warnings = [_mixed_files_warning(folder, name, names)
                       for name, names in sources.items() if len(names) > 1]
    return raws, report


_SPLIT = re.compile(r"(?:^|[_.\-])(test|validation|val|dev|train)(?=$|[_.\-])", re.IGNORECASE)


def split_of(file_name: str) -> str | None:
    """The split a benchmark file's name says it holds (`arc_challenge_validation.jsonl`:
    validation), or None when the name does not say."""
    found = _SPLIT.findall(Path(file_name).stem)
    return {"val": "validation"}.get(found[-1].lower(), found[-1].lower()) if found else None


def _with_split(file_name: str) -> str:
    return f"{file_name} ({split_of(file_name) or 'split not named'})"


def _mixed_files_warning(folder: Path, benchmark: str, files: list[str]) -> str:
    """A folder that holds one benchmark in several files mixes splits (test and validation
    items scored as one set) or versions (two TruthfulQA files): say which, naming them."""
    splits = {split_of(f.rsplit(" (", 1)[0]) for f in files}
    kind = ("mixes splits" if len(splits) > 1 and None not in splits
            else "holds several versions or copies")
    return (f"{folder.name}: {benchmark} is read from {len(files)} files, which {kind}: "
            f"{', '.join(files)}; their items are scored as one benchmark (pass one file "
            "with --items to keep them apart)")
