"""Item loaders (SPEC §1): our normalised JSONL and the native formats people have on disk.

A spec is a file, a folder (every item file directly in it) or a named hub source
(`grid/sources.py`). Each file is read as rows (JSONL lines, JSON array elements, CSV rows,
Parquet rows); a per-format converter turns every row into a `RawItem` that remembers its
`path:line`, and `items.assemble_all()` makes the four-option items and the `LoadReport`.
Anything malformed raises one `InputError` naming the file, the line (Parquet: the 1-based
row) and the field. docs/items.md documents formats, detection, ids and exclusion reasons.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.grid.items import Item, LoadReport, RawItem, assemble_all, sample

FORMATS = ("normalized", "arc", "hellaswag", "mmlu", "truthfulqa", "generic")
ITEM_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet")
KNOWN_BENCHMARKS = ("arc_challenge", "arc_easy", "hellaswag", "mmlu", "truthfulqa")
MMLU_FILE = re.compile(r"^(?P<subject>.+)_(?P<split>test|dev|val)\.csv$")
MMLU_HEADER = ["question", "choice0", "choice1", "choice2", "choice3", "answer"]
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# ---------------------------------------------------------------- rows and their places


@dataclass
class Row:
    data: dict | list
    line: int  # 1-based line where the record starts (Parquet: 1-based row number)
    index: int  # 0-based position among the file's records


@dataclass
class FileContext:
    """What converters know about the file being read."""

    path: Path
    benchmark: str | None = None  # the caller's benchmark= argument
    split: str | None = None  # split hint (named sources); else inferred from the name
    header: list[str] | None = None  # CSV header, for the header-based formats
    counters: dict = field(default_factory=dict)  # running state (MMLU row per subject)

    def fail(self, message: str, row: Row | None = None, field: str | None = None) -> InputError:
        return InputError(message, path=str(self.path), line=row.line if row else None,
                          field=field)


class PairsDict(dict):
    """A JSON object that also keeps its (key, value) pairs in file order, duplicates
    included: TruthfulQA's mc1_targets may repeat an answer text as a key."""

    pairs: list


def _pairs_hook(pairs: list) -> PairsDict:
    obj = PairsDict(pairs)
    obj.pairs = pairs
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs_hook)


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if not data.strip():
        raise InputError("empty file: no items", path=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"invalid UTF-8 (byte 0x{data[exc.start]:02x}); save the file as "
                         "UTF-8", path=str(path), line=line) from None
    return text.removeprefix("\ufeff")


def _jsonl_rows(ctx: FileContext, text: str) -> Iterator[Row]:
    index = 0
    # split on "\n" only: JSON strings may legally contain U+2028 and other separators
    for line_no, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = _DECODER.decode(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON at column {exc.colno} ({exc.msg}); is the line "
                             "truncated?", path=str(ctx.path), line=line_no) from None
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {_type_name(obj)}",
                             path=str(ctx.path), line=line_no)
        yield Row(obj, line_no, index)
        index += 1


def _json_array_rows(ctx: FileContext, text: str) -> Iterator[Row]:
    """Elements of a top-level JSON array, each with the line it starts on."""
    ws = re.compile(r"\s*")
    pos = ws.match(text, 0).end()
    if text[pos] != "[":
        raise ctx.fail("expected a JSON array of records (or one JSON object per line)",
                       Row({}, _line_at(text, pos), 0))
    pos = ws.match(text, pos + 1).end()
    index, line, counted = 0, 1, 0
    while pos < len(text) and not (index == 0 and text[pos] == "]"):
        line, counted = line + text.count("\n", counted, pos), pos  # incremental: big files
        try:
            obj, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            hint = "; is the file truncated?" if exc.pos >= len(text.rstrip()) - 1 else ""
            raise InputError(f"invalid JSON at column {exc.colno} ({exc.msg}){hint}",
                             path=str(ctx.path), line=exc.lineno) from None
        if not isinstance(obj, dict):
            raise ctx.fail(f"expected a JSON object, got {_type_name(obj)}", Row({}, line, index))
        yield Row(obj, line, index)
        index += 1
        pos = ws.match(text, pos).end()
        if pos < len(text) and text[pos] == "]":
            break
        if pos >= len(text) or text[pos] != ",":
            raise ctx.fail("invalid JSON: expected ',' or ']' after a record; is the file "
                           "truncated?", Row({}, _line_at(text, pos), index))
        pos = ws.match(text, pos + 1).end()
    if pos >= len(text):
        raise ctx.fail("invalid JSON: the array is not closed; is the file truncated?",
                       Row({}, _line_at(text, len(text)), index))
    if text[pos + 1:].strip():
        raise ctx.fail("invalid JSON: text after the closing ']'", Row({}, _line_at(text, pos + 1), index))


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _csv_records(ctx: FileContext, text: str) -> Iterator[tuple[int, list[str]]]:
    """(start line, fields) per CSV record; blank records are skipped."""
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"invalid CSV ({exc})", path=str(ctx.path), line=reader.line_num) from None
        if any(f.strip() for f in fields):
            yield start, fields


def _parquet_rows(ctx: FileContext) -> Iterator[Row]:
    import duckdb  # the store's engine; imported here so text formats need no DuckDB

    con = duckdb.connect()
    try:
        cur = con.execute("SELECT * FROM read_parquet(?, file_row_number = true) "
                          "ORDER BY file_row_number", [str(ctx.path)])
        names = [d[0] for d in cur.description]
        records = cur.fetchall()
    except duckdb.Error as exc:
        raise ctx.fail(f"cannot read Parquet: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    if not records:
        raise ctx.fail("empty file: no items")
    for index, values in enumerate(records):
        data = {k: v for k, v in zip(names, values) if k != "file_row_number"}
        yield Row(data, index + 1, index)


# ---------------------------------------------------------------- field checks


def _type_name(value: object) -> str:
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
             (dict, "an object"), (list, "a list"), (type(None), "null"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def _need(ctx: FileContext, row: Row, rec: dict, key: str, label: str | None = None) -> object:
    """rec[key], or an error naming the field (`label` when the field is nested)."""
    if key not in rec or rec[key] is None:
        raise ctx.fail(f"missing {label or key}", row, label or key)
    return rec[key]


def _need_str(ctx: FileContext, row: Row, rec: dict, key: str, label: str | None = None) -> str:
    value = _need(ctx, row, rec, key, label)
    if not isinstance(value, str):
        raise ctx.fail(f"must be a string, got {_type_name(value)}", row, label or key)
    return value


def _check_choices(ctx: FileContext, row: Row, choices: object, label: str) -> tuple[str, ...]:
    if not isinstance(choices, (list, tuple)):
        raise ctx.fail(f"must be a list of option texts, got {_type_name(choices)}", row, label)
    for i, choice in enumerate(choices):
        if not isinstance(choice, str):
            raise ctx.fail(f"option {i} must be a string, got {_type_name(choice)}", row, label)
    if len(choices) < 2:
        raise ctx.fail(f"an item needs at least 2 choices, got {len(choices)}", row, label)
    return tuple(choices)


def _check_gold(ctx: FileContext, row: Row, gold: int, n_choices: int, label: str,
                shown: object = None) -> int:
    if not 0 <= gold < n_choices:
        valid = f"0..{n_choices - 1}" if shown is None else f"A..{LETTERS[n_choices - 1]}"
        raise ctx.fail(f"gold {gold if shown is None else shown!r} is out of range for "
                       f"{n_choices} choices ({valid})", row, label)
    return gold


def _gold_index(ctx: FileContext, row: Row, value: object, n_choices: int, label: str,
                letters: bool = True) -> int:
    """A 0-based integer, a digit string, or (when `letters`) a letter A.. (case-insensitive)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ctx.fail("missing gold answer", row, label)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ctx.fail(f"gold must be a 0-based integer{' or a letter' if letters else ''}, "
                       f"got {_type_name(value)}", row, label)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text):
            return _check_gold(ctx, row, int(text), n_choices, label)
        if letters and len(text) == 1 and text.upper() in LETTERS:
            return _check_gold(ctx, row, LETTERS.index(text.upper()), n_choices, label, text)
        raise ctx.fail(f"gold {value!r} is neither a 0-based index"
                       f"{' nor a letter' if letters else ''}", row, label)
    return _check_gold(ctx, row, value, n_choices, label)


def _required_id(ctx: FileContext, row: Row, rec: dict, key: str = "id") -> str:
    source_id = _source_id(ctx, row, rec, key, "")
    if not source_id:
        raise ctx.fail("missing item id", row, key)
    return source_id


def _source_id(ctx: FileContext, row: Row, rec: dict, key: str, default: str) -> str:
    value = rec.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ctx.fail(f"must be a string or an integer, got {_type_name(value)}", row, key)
    return str(value).strip() or default


def _subject(ctx: FileContext, row: Row, value: object, label: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ctx.fail(f"must be a string or null, got {_type_name(value)}", row, label)
    return value


def _benchmark(ctx: FileContext, row: Row, from_record: object, implied: str | None) -> str:
    """Precedence: the record's field, the caller's benchmark=, what the format or the file
    name implies; else an error asking for benchmark=."""
    if from_record is not None and from_record != "":
        if not isinstance(from_record, str):
            raise ctx.fail(f"must be a string, got {_type_name(from_record)}", row, "benchmark")
        name = from_record
    else:
        name = ctx.benchmark or implied
    if not name:
        raise ctx.fail("cannot tell which benchmark these items belong to: add a "
                       "'benchmark' field/column or pass benchmark=NAME", row, "benchmark")
    if "/" in name or not name.strip() or name != name.strip():
        raise ctx.fail(f"benchmark name {name!r} must be non-empty, without '/' or edge spaces",
                       row, "benchmark")
    return name


def _name_and_folders(path: Path) -> list[str]:
    """The file name, then its folder and the folder above (data/arc_challenge/official/...)."""
    return [path.name] + [p.name for p in list(path.parents)[:2]]


def benchmark_from_path(path: Path) -> str | None:
    """A known benchmark named in the file name or, failing that, a folder just above it."""
    for part in _name_and_folders(path):
        low = part.lower().replace("-", "_")
        for name in KNOWN_BENCHMARKS + ("truthful_qa",):
            if name in low:
                return "truthfulqa" if name == "truthful_qa" else name
    return None


def _arc_benchmark_from_path(path: Path) -> str | None:
    for part in _name_and_folders(path):
        low = part.lower()
        if "challenge" in low:
            return "arc_challenge"
        if "easy" in low:
            return "arc_easy"
    return None


def _split_from_name(path: Path) -> str | None:
    """'test' / 'dev' / 'val' / 'train' from a file name like mmlu_test.jsonl or
    validation-00000-of-00001.parquet."""
    tokens = re.split(r"[^a-z]+", path.stem.lower())
    for token in tokens:
        if token in ("validation", "val", "valid"):
            return "val"
        if token in ("test", "dev", "train"):
            return token
    return None


# ---------------------------------------------------------------- converters, one per format


def _from_normalized(ctx: FileContext, row: Row) -> RawItem:
    rec = row.data
    question = _need_str(ctx, row, rec, "question")
    choices = _check_choices(ctx, row, _need(ctx, row, rec, "choices"), "choices")
    if rec.get("gold") is None:
        raise ctx.fail("missing gold answer", row, "gold")
    gold = rec["gold"]
    if isinstance(gold, bool) or not isinstance(gold, int):
        raise ctx.fail(f"gold must be a 0-based integer, got {_type_name(gold)}", row, "gold")
    _check_gold(ctx, row, gold, len(choices), "gold")
    return RawItem(_source_id(ctx, row, rec, "id", f"{row.index:05d}"),
                   _benchmark(ctx, row, rec.get("benchmark"), benchmark_from_path(ctx.path)),
                   _subject(ctx, row, rec.get("subject"), "subject"), question, choices, gold,
                   f"{ctx.path}:{row.line}")


def _from_arc(ctx: FileContext, row: Row) -> RawItem:
    """Original ARC JSONL (question.stem, question.choices[{text,label}]) or the Hugging Face
    layout (question string, choices {text: [...], label: [...]}); gold = the position of
    answerKey among the labels (A-E or 1-5), as in our normalised files."""
    rec = row.data
    if isinstance(rec.get("question"), dict):
        stem = _need_str(ctx, row, rec["question"], "stem", "question.stem")
        options = _need(ctx, row, rec["question"], "choices", "question.choices")
        if not isinstance(options, list) or not all(isinstance(o, dict) for o in options):
            raise ctx.fail("must be a list of {text, label} objects", row, "question.choices")
        texts = [o.get("text") for o in options]
        labels = [o.get("label") for o in options]
        where = "question.choices"
    else:
        stem = _need_str(ctx, row, rec, "question")
        options = _need(ctx, row, rec, "choices")
        if not isinstance(options, dict) or "text" not in options or "label" not in options:
            raise ctx.fail("must be an object with 'text' and 'label' lists", row, "choices")
        texts, labels, where = options["text"], options["label"], "choices"
    choices = _check_choices(ctx, row, texts, where)
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
    return RawItem(_required_id(ctx, row, rec),
                   _benchmark(ctx, row, rec.get("benchmark"), _arc_benchmark_from_path(ctx.path)),
                   None, stem, choices, labels.index(str(answer).strip()), f"{ctx.path}:{row.line}")


def _from_hellaswag(ctx: FileContext, row: Row) -> RawItem:
    """Native HellaSwag rows (JSONL or the Hugging Face Parquet): the question is `ctx`, or
    ctx_a + " " + ctx_b when ctx is absent; ids are hellaswag_<split>_<0-based row>."""
    rec = row.data
    choices = _check_choices(ctx, row, _need(ctx, row, rec, "endings"), "endings")
    if rec.get("label") is None or rec.get("label") == "":
        raise ctx.fail("missing gold answer (HellaSwag's test split has no labels; use the "
                       "validation split)", row, "label")
    gold = _gold_index(ctx, row, rec.get("label"), len(choices), "label", letters=False)
    if isinstance(rec.get("ctx"), str) and rec["ctx"].strip():
        question = rec["ctx"]
    else:
        ctx_a = _need_str(ctx, row, rec, "ctx_a", "ctx")
        ctx_b = rec.get("ctx_b") or ""
        if not isinstance(ctx_b, str):
            raise ctx.fail(f"must be a string, got {_type_name(ctx_b)}", row, "ctx_b")
        question = f"{ctx_a} {ctx_b}" if ctx_b else ctx_a
    return RawItem(f"hellaswag_{_hellaswag_split(ctx, rec)}_{row.index:05d}",
                   _benchmark(ctx, row, rec.get("benchmark"), "hellaswag"),
                   _subject(ctx, row, rec.get("activity_label"), "activity_label"),
                   question, choices, gold, f"{ctx.path}:{row.line}")


def _hellaswag_split(ctx: FileContext, rec: dict) -> str:
    """The row's own `split` field (HellaSwag writes "val"), else the hint or the file name."""
    split = rec.get("split")
    if isinstance(split, str) and split.strip():
        return {"validation": "val"}.get(split.strip(), split.strip())
    return ctx.split or _split_from_name(ctx.path) or "val"


def _mmlu_names(ctx: FileContext, row: Row, subject: str | None) -> tuple[str, str]:
    """(subject, split) from the record, else the <subject>_<split>.csv file name."""
    match = MMLU_FILE.match(ctx.path.name)
    subject = subject or (match["subject"] if match else None)
    if not subject:
        raise ctx.fail("missing MMLU subject: name the file <subject>_test.csv or add a "
                       "'subject' column", row, "subject")
    split = ctx.split or (match["split"] if match else None) or _split_from_name(ctx.path) or "test"
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
        gold = _gold_index(ctx, row, answer, 4, "answer", letters=letters)
        subject_value = None
    else:
        question = _need_str(ctx, row, rec, "question")
        choices = _check_choices(ctx, row, _need(ctx, row, rec, "choices"), "choices")
        gold = _gold_index(ctx, row, rec.get("answer"), len(choices), "answer")
        subject_value = _subject(ctx, row, rec.get("subject"), "subject")
    subject, split = _mmlu_names(ctx, row, subject_value)
    n = ctx.counters.get(subject, 0)
    ctx.counters[subject] = n + 1
    return RawItem(f"mmlu_{split}/{subject}/{n:04d}", _benchmark(ctx, row, None, "mmlu"),
                   subject, question, choices, gold, f"{ctx.path}:{row.line}")


def _from_truthfulqa(ctx: FileContext, row: Row) -> RawItem:
    """TruthfulQA MC1: `mc_task.json` ({answer: 0/1} in key order, duplicates kept) or the
    Hugging Face Parquet ({choices: [...], labels: [...]}). Gold = the one answer marked 1."""
    rec = row.data
    question = _need_str(ctx, row, rec, "question")
    targets = _need(ctx, row, rec, "mc1_targets")
    if isinstance(targets, dict) and set(targets) == {"choices", "labels"}:
        texts, marks = targets["choices"], targets["labels"]
    elif isinstance(targets, dict):
        pairs = getattr(targets, "pairs", list(targets.items()))
        texts, marks = [k for k, _ in pairs], [v for _, v in pairs]
    else:
        raise ctx.fail(f"must be an object of answer: 0/1, got {_type_name(targets)}", row,
                       "mc1_targets")
    choices = _check_choices(ctx, row, texts, "mc1_targets")
    if not isinstance(marks, list) or len(marks) != len(choices) or any(
            isinstance(m, bool) or m not in (0, 1) for m in marks):
        raise ctx.fail("every answer must be marked 0 or 1", row, "mc1_targets")
    if marks.count(1) != 1:
        raise ctx.fail(f"{marks.count(1)} answers are marked correct; MC1 needs exactly one "
                       "(missing or ambiguous gold)", row, "mc1_targets")
    return RawItem(f"truthfulqa_{row.index:03d}", _benchmark(ctx, row, rec.get("benchmark"), "truthfulqa"),
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
        return _check_choices(ctx, row, value, "choices")
    columns = _option_columns(rec)
    values = [rec[c] for c in columns]
    while values and (values[-1] is None or (isinstance(values[-1], str) and not values[-1].strip())):
        values.pop()
    return _check_choices(ctx, row, ["" if v is None else v for v in values], columns[0] + "..")


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
    question = _need_str(ctx, row, rec, "question")
    choices = _generic_choices(ctx, row, rec)
    gold_key = "gold" if "gold" in rec else "answer"
    gold = _gold_index(ctx, row, rec.get(gold_key), len(choices), gold_key)
    return RawItem(_source_id(ctx, row, rec, "id", f"{row.index:05d}"),
                   _benchmark(ctx, row, rec.get("benchmark"), benchmark_from_path(ctx.path)),
                   _subject(ctx, row, rec.get("subject"), "subject"), question, choices, gold,
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
    records = _csv_records(ctx, text)
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
    rows = _json_array_rows(ctx, text) if array else _jsonl_rows(ctx, text)
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
            raws.append(convert(ctx, row))
    check_unique(raws)
    return raws, LoadReport(", ".join(str(p) for p in paths), read=len(raws))


def _open(ctx: FileContext, fmt: str | None) -> tuple[Callable[[FileContext, Row], RawItem], Iterator[Row]]:
    """The converter and the rows of ctx.path, by extension and (unless `fmt`) content."""
    suffix = ctx.path.suffix.lower()
    if suffix == ".parquet":
        fmt, rows = _parquet_format(ctx, _parquet_rows(ctx), fmt)
    elif suffix in (".jsonl", ".ndjson", ".json"):
        fmt, rows = _json_rows(ctx, _read_text(ctx.path), fmt)
    elif suffix == ".csv":
        fmt, rows = _csv_rows(ctx, _read_text(ctx.path), fmt)
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
    for file in files:
        file_raws, _ = read_file(file, fmt=fmt, benchmark=benchmark)
        raws += file_raws
    check_unique(raws)
    return raws, LoadReport(str(folder), read=len(raws))


def read_spec(spec: str | os.PathLike, *, fmt: str | None = None,
              benchmark: str | None = None) -> tuple[list[RawItem], LoadReport]:
    """A file, a folder, or a named source (when no such path exists)."""
    path = Path(spec)
    if path.is_dir():
        return read_folder(path, fmt=fmt, benchmark=benchmark)
    if path.is_file():
        return read_file(path, fmt=fmt, benchmark=benchmark)
    from fragility_tui.grid import sources  # lazy: sources imports this module

    if sources.is_named_source(str(spec)):
        return sources.read_source(str(spec))
    raise InputError(f"no such file, folder or named source ({', '.join(sources.SOURCE_NAMES)}, "
                     "optionally with :split)", path=str(spec))


# ---------------------------------------------------------------- public entry points


def load_items(spec: str | os.PathLike, *, per_benchmark: int | None = None, seed: int = 0,
               benchmark: str | None = None, fmt: str | None = None) -> tuple[list[Item], LoadReport]:
    """Four-option items from one spec, optionally sampled (up to `per_benchmark` per
    benchmark, seeded), and the report of what was kept and excluded."""
    return load_many([spec], per_benchmark=per_benchmark, seed=seed, benchmark=benchmark, fmt=fmt)


def load_many(specs: list[str | os.PathLike], *, per_benchmark: int | None = None, seed: int = 0,
              benchmark: str | None = None, fmt: str | None = None) -> tuple[list[Item], LoadReport]:
    """The union of several specs (in order); sampling applies per benchmark over the union.
    The same item id in two specs is an error."""
    if not specs:
        raise InputError("no item files given", field="items")
    if per_benchmark is not None and (isinstance(per_benchmark, bool) or per_benchmark < 1):
        raise InputError(f"per-benchmark sample size must be at least 1, got {per_benchmark}",
                         field="per_benchmark")
    seen: dict[str, str] = {}
    items: list[Item] = []
    report: LoadReport | None = None
    for spec in specs:
        raws, part = read_spec(spec, fmt=fmt, benchmark=benchmark)
        check_unique(raws, seen)
        items += assemble_all(raws, part)
        report = part if report is None else report.merge(part)
    if not items:
        raise InputError(f"no usable items: {report.summary()}", path=report.source)
    if per_benchmark is not None:
        items = sample(items, per_benchmark, seed)
        report.selected = len(items)
    return items, report
