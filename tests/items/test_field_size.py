"""Issue 47 item 5: an item field over MAX_FIELD_CHARS (a 2 MB option, a 50 MB question) is
refused when the file is read, naming the file, line and field, instead of reaching the
model and ending in a misleading "out of memory"."""

from __future__ import annotations

import json

import pytest

from fragility_tui.errors import InputError
from fragility_tui.items.loaders import load_items
from fragility_tui.items.rows import MAX_FIELD_CHARS


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def row(i, question="Which?", choices=("a", "b", "c", "d")):
    return {"id": f"q{i}", "benchmark": "toy", "subject": None, "question": question,
            "choices": list(choices), "gold": 0}


def test_an_oversized_option_names_file_line_and_field(tmp_path):
    path = write(tmp_path / "items.jsonl",
                 [row(0), row(1, choices=("a", "b" * 2_000_000, "c", "d"))])
    with pytest.raises(InputError) as caught:
        load_items(str(path))
    message = str(caught.value)
    assert str(path) in message and ":2" in message and "option 1" in message
    assert "2,000,000 characters" in message


def test_an_oversized_question_is_refused_and_a_long_one_is_kept(tmp_path):
    long_ok = "x" * MAX_FIELD_CHARS
    items, _ = load_items(str(write(tmp_path / "ok.jsonl", [row(0, question=long_ok)])))
    assert items[0].question == long_ok
    with pytest.raises(InputError, match="question is"):
        load_items(str(write(tmp_path / "big.jsonl", [row(0, question=long_ok + "x")])))
