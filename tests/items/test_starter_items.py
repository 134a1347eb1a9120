"""The shipped starter items (sample_grids/starter_items.jsonl, docs/starter_items.md).

They are the default `--items` of a first run, so the file must be well formed, balanced and
our own text: these tests check the schema line by line, the group sizes, that the gold is
not given away by its position or by being the longest option, and (when ../shared/benchmarks
is present) that no item shares a verbatim 8-word span with the real benchmarks.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from helpers import REPO, require_shared_benchmarks

STARTER = REPO / "sample_grids" / "starter_items.jsonl"
DOC = REPO / "docs" / "starter_items.md"
GROUPS = {  # benchmark name -> id prefix
    "starter_science": "sci",
    "starter_completion": "comp",
    "starter_academic": "acad",
    "starter_misconceptions": "misc",
}
FIELDS = {"id", "benchmark", "subject", "question", "choices", "gold"}
MIN_TOTAL, MIN_PER_GROUP, MIN_ACADEMIC_SUBJECTS = 240, 60, 8
GOLD_SHARE = (0.15, 0.35)  # each gold position's share within a group
MAX_LENGTH_GIVEAWAY = 0.35  # share of a group where the gold is the strictly longest option
SHINGLE_WORDS = 8


def _read_starter(path: Path = STARTER) -> list[dict]:
    """Every line parsed, with a failure that names path:line and the field."""
    rows = []
    for line_no, line in enumerate(_lines(path), 1):
        where = f"{path.name}:{line_no}"
        assert line.strip(), f"{where}: blank line"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{where}: not valid JSON ({exc})")
        assert isinstance(row, dict) and set(row) == FIELDS, f"{where}: fields {sorted(row)}"
        _check_row(row, where)
        rows.append(row)
    return rows


def _lines(path: Path) -> list[str]:
    """JSONL lines, split at line feeds only: str.splitlines would also split at U+2028 and
    other separators that may legally sit inside a JSON string."""
    text = path.read_text(encoding="utf-8")
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def _check_row(row: dict, where: str) -> None:
    for key in ("id", "benchmark", "question"):
        value = row[key]
        assert isinstance(value, str) and value.strip() == value and value, f"{where}: {key}"
    assert row["subject"] is None or (isinstance(row["subject"], str) and row["subject"].strip()), \
        f"{where}: subject"
    choices = row["choices"]
    assert isinstance(choices, list) and len(choices) == 4, f"{where}: choices must be 4"
    for choice in choices:
        assert isinstance(choice, str) and choice.strip() == choice and choice, \
            f"{where}: choices has an empty or padded option {choice!r}"
    assert len({_normal(c) for c in choices}) == 4, f"{where}: choices are not distinct"
    gold = row["gold"]
    assert isinstance(gold, int) and not isinstance(gold, bool) and 0 <= gold < 4, \
        f"{where}: gold {gold!r}"


def _normal(text: str) -> str:
    return " ".join(_words(text))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _shingles(text: str, n: int = SHINGLE_WORDS) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _by_group(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["benchmark"], []).append(row)
    return groups


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return _read_starter()


def test_every_line_follows_the_normalised_schema():
    rows = _read_starter()  # asserts each line's fields, types, choices and gold
    assert len(rows) == len(_lines(STARTER))


def test_sizes_and_groups(rows):
    groups = _by_group(rows)
    assert set(groups) == set(GROUPS)
    assert len(rows) >= MIN_TOTAL
    for name, items in groups.items():
        assert len(items) >= MIN_PER_GROUP, f"{name}: only {len(items)} items"


def test_ids_are_unique_and_prefixed_by_group(rows):
    ids = [row["id"] for row in rows]
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    for row in rows:
        assert re.fullmatch(rf"{GROUPS[row['benchmark']]}_\d{{3}}", row["id"]), row["id"]


def test_questions_are_unique(rows):
    seen = Counter(_normal(row["question"]) for row in rows)
    assert [q for q, n in seen.items() if n > 1] == []


def test_gold_positions_are_balanced_in_each_group(rows):
    low, high = GOLD_SHARE
    for name, items in _by_group(rows).items():
        counts = Counter(row["gold"] for row in items)
        for position in range(4):
            share = counts[position] / len(items)
            assert low <= share <= high, f"{name}: gold at {position} in {share:.0%} of items"


def test_the_longest_option_does_not_give_the_answer_away(rows):
    for name, items in _by_group(rows).items():
        giveaways = 0
        for row in items:
            lengths = sorted(len(c) for c in row["choices"])
            gold_len = len(row["choices"][row["gold"]])
            giveaways += gold_len == lengths[-1] > lengths[-2]
        assert giveaways / len(items) <= MAX_LENGTH_GIVEAWAY, \
            f"{name}: the gold is the longest option in {giveaways} of {len(items)} items"


def test_subjects(rows):
    groups = _by_group(rows)
    academic = {row["subject"] for row in groups["starter_academic"]}
    assert None not in academic and len(academic) >= MIN_ACADEMIC_SUBJECTS, sorted(academic)
    # a completion item's subject is its activity (like HellaSwag's activity_label)
    assert all(row["subject"] for row in groups["starter_completion"])


def test_the_project_loader_keeps_every_item_unchanged(rows):
    from fragility_tui.items.loaders import load_items

    items, report = load_items(STARTER)
    assert report.kept == report.read == len(rows) and not report.excluded
    assert [it.to_json() for it in items] == rows


def test_the_doc_table_matches_the_file(rows):
    """docs/starter_items.md states per-group counts and gold positions; keep them true."""
    table = re.findall(r"^\| (starter_\w+) \| (\d+) \| (\d+)/(\d+)/(\d+)/(\d+) \|",
                       DOC.read_text(encoding="utf-8"), flags=re.M)
    documented = {name: [int(n) for n in numbers] for name, *numbers in table}
    actual = {}
    for name, items in _by_group(rows).items():
        gold = Counter(row["gold"] for row in items)
        actual[name] = [len(items)] + [gold[p] for p in range(4)]
    assert documented == actual


def test_a_malformed_line_is_reported_with_its_line(tmp_path):
    good = _lines(STARTER)[0]
    bad = json.loads(good)
    bad["choices"] = bad["choices"][:3]
    path = tmp_path / "starter.jsonl"
    path.write_text(good + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"starter\.jsonl:2: choices must be 4"):
        _read_starter(path)


# ---------------------------------------------------------------- originality (needs ../shared)


@pytest.fixture(scope="module")
def benchmark_text() -> tuple[set[tuple[str, ...]], set[str]]:
    """8-word shingles of every real benchmark question and option, and the normalised
    questions themselves (short questions have no 8-word shingle to compare)."""
    folder = require_shared_benchmarks()
    shingles: set[tuple[str, ...]] = set()
    questions: set[str] = set()
    for path in sorted(folder.glob("*.jsonl")):
        for line in _lines(path):
            item = json.loads(line)
            questions.add(_normal(item["question"]))
            for text in [item["question"], *item["choices"]]:
                shingles |= _shingles(text)
    assert questions, f"no benchmark items read from {folder}"
    return shingles, questions


def _copied_spans(row: dict, shingles: set[tuple[str, ...]]) -> list[str]:
    spans = set()
    for text in [row["question"], *row["choices"]]:
        spans |= _shingles(text) & shingles
    return sorted(" ".join(s) for s in spans)


@pytest.mark.shared
def test_no_item_copies_an_8_word_span_from_the_real_benchmarks(rows, benchmark_text):
    shingles, _ = benchmark_text
    copied = {row["id"]: spans for row in rows if (spans := _copied_spans(row, shingles))}
    assert copied == {}


@pytest.mark.shared
def test_no_question_equals_a_real_benchmark_question(rows, benchmark_text):
    _, questions = benchmark_text
    assert [row["id"] for row in rows if _normal(row["question"]) in questions] == []


@pytest.mark.shared
def test_the_overlap_check_catches_a_copied_question(shared_benchmarks):
    """The check above must be able to fail: a real question pasted in is caught."""
    line = _lines(shared_benchmarks / "arc_easy_test.jsonl")[0]
    real = json.loads(line)
    assert len(_words(real["question"])) >= SHINGLE_WORDS
    shingles = _shingles(real["question"])
    pasted = {"question": f"Think carefully. {real['question']}", "choices": ["a", "b", "c", "d"]}
    assert _copied_spans(pasted, shingles)
