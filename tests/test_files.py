"""fragility_tui/files.py: the one atomic write, and fragility_tui/text.py's md_cell."""

from __future__ import annotations

import pytest

from fragility_tui.files import write_atomic, write_text_atomic
from fragility_tui.text import md_cell


def test_a_write_lands_whole_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "new" / "folder" / "out.json"
    write_text_atomic(target, "é{}")
    assert target.read_text(encoding="utf-8") == "é{}"
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def half_then_fail(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, half_then_fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.parametrize("value, cell", [
    (None, ""), (3, "3"), ("a|b", "a\\|b"), ("back\\slash", "back\\\\slash"),
    ("two\r\nlines", "two<br>lines"), (["x", "y|z"], '["x", "y\\|z"]'),
])
def test_md_cell_keeps_a_value_in_its_cell(value, cell):
    assert md_cell(value) == cell
