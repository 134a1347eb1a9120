"""Item files as rows, and the checks every field goes through (SPEC §1).

A file is read as rows (JSONL lines, JSON array elements, CSV rows, Parquet rows), each with
its place (`path:line`; Parquet: the 1-based row), so any malformed field raises one
`InputError` naming the file, the line and the field. The per-format converters that turn
rows into `RawItem`s are in `item_formats.py`.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fragility_tui.errors import InputError

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


def read_text(path: Path) -> str:
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


def jsonl_rows(ctx: FileContext, text: str) -> Iterator[Row]:
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
            raise InputError(f"expected a JSON object, got {type_name(obj)}",
                             path=str(ctx.path), line=line_no)
        yield Row(obj, line_no, index)
        index += 1


def json_array_rows(ctx: FileContext, text: str) -> Iterator[Row]:
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
            raise ctx.fail(f"expected a JSON object, got {type_name(obj)}", Row({}, line, index))
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


def csv_records(ctx: FileContext, text: str) -> Iterator[tuple[int, list[str]]]:
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


def parquet_rows(ctx: FileContext) -> Iterator[Row]:
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


def type_name(value: object) -> str:
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
             (dict, "an object"), (list, "a list"), (type(None), "null"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def need(ctx: FileContext, row: Row, rec: dict, key: str, label: str | None = None) -> object:
    """rec[key], or an error naming the field (`label` when the field is nested)."""
    if key not in rec or rec[key] is None:
        raise ctx.fail(f"missing {label or key}", row, label or key)
    return rec[key]


def need_str(ctx: FileContext, row: Row, rec: dict, key: str, label: str | None = None) -> str:
    value = need(ctx, row, rec, key, label)
    if not isinstance(value, str):
        raise ctx.fail(f"must be a string, got {type_name(value)}", row, label or key)
    return value


# characters of one question or option: the longest MMLU question is ~5,000; a field far
# past this is a broken file, and would surface later as an "out of memory" of the model
MAX_FIELD_CHARS = 32_768


def check_size(ctx: FileContext, row: Row, raw):
    """The item, or an error naming the file, line and field that is too long."""
    fields = [("question", raw.question)] + [(f"option {i}", c) for i, c in
                                             enumerate(raw.choices)]
    for name, text in fields:
        if len(text) > MAX_FIELD_CHARS:
            raise ctx.fail(f"{name} is {len(text):,} characters, over the {MAX_FIELD_CHARS:,} "
                           "an item field may hold", row, name)
    return raw


def check_choices(ctx: FileContext, row: Row, choices: object, label: str) -> tuple[str, ...]:
    if not isinstance(choices, (list, tuple)):
        raise ctx.fail(f"must be a list of option texts, got {type_name(choices)}", row, label)
    for i, choice in enumerate(choices):
        if not isinstance(choice, str):
            raise ctx.fail(f"option {i} must be a string, got {type_name(choice)}", row, label)
    if len(choices) < 2:
        raise ctx.fail(f"an item needs at least 2 choices, got {len(choices)}", row, label)
    return tuple(choices)


def check_gold(ctx: FileContext, row: Row, gold: int, n_choices: int, label: str,
                shown: object = None) -> int:
    if not 0 <= gold < n_choices:
        valid = f"0..{n_choices - 1}" if shown is None else f"A..{LETTERS[n_choices - 1]}"
        raise ctx.fail(f"gold {gold if shown is None else shown!r} is out of range for "
                       f"{n_choices} choices ({valid})", row, label)
    return gold


def gold_index(ctx: FileContext, row: Row, value: object, n_choices: int, label: str,
                letters: bool = True) -> int:
    """A 0-based integer, a digit string, or (when `letters`) a letter A.. (case-insensitive)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ctx.fail("missing gold answer", row, label)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ctx.fail(f"gold must be a 0-based integer{' or a letter' if letters else ''}, "
                       f"got {type_name(value)}", row, label)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text):
            return check_gold(ctx, row, int(text), n_choices, label)
        if letters and len(text) == 1 and text.upper() in LETTERS:
            return check_gold(ctx, row, LETTERS.index(text.upper()), n_choices, label, text)
        raise ctx.fail(f"gold {value!r} is neither a 0-based index"
                       f"{' nor a letter' if letters else ''}", row, label)
    return check_gold(ctx, row, value, n_choices, label)


def required_id(ctx: FileContext, row: Row, rec: dict, key: str = "id") -> str:
    source_id = record_id(ctx, row, rec, key, "")
    if not source_id:
        raise ctx.fail("missing item id", row, key)
    return source_id


def record_id(ctx: FileContext, row: Row, rec: dict, key: str, default: str) -> str:
    value = rec.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ctx.fail(f"must be a string or an integer, got {type_name(value)}", row, key)
    return str(value).strip() or default


def subject_of(ctx: FileContext, row: Row, value: object, label: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ctx.fail(f"must be a string or null, got {type_name(value)}", row, label)
    return value


def benchmark_of(ctx: FileContext, row: Row, from_record: object, implied: str | None) -> str:
    """Precedence: the record's field, the caller's benchmark=, what the format or the file
    name implies; else an error asking for benchmark=."""
    if from_record is not None and from_record != "":
        if not isinstance(from_record, str):
            raise ctx.fail(f"must be a string, got {type_name(from_record)}", row, "benchmark")
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


def arc_benchmark_from_path(path: Path) -> str | None:
    for part in _name_and_folders(path):
        low = part.lower()
        if "challenge" in low:
            return "arc_challenge"
        if "easy" in low:
            return "arc_easy"
    return None


def split_from_name(path: Path) -> str | None:
    """'test' / 'dev' / 'val' / 'train' from a file name like mmlu_test.jsonl or
    validation-00000-of-00001.parquet."""
    tokens = re.split(r"[^a-z]+", path.stem.lower())
    for token in tokens:
        if token in ("validation", "val", "valid"):
            return "val"
        if token in ("test", "dev", "train"):
            return token
    return None
