"""fragility_tui/files.py: the one atomic write, and fragility_tui/text.py's md_cell."""

from __future__ import annotations

import pytest

import os
import socket
import subprocess
import sys

from fragility_tui.files import sweep_stale_temporaries, write_atomic, write_text_atomic
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


def test_only_a_dead_writer_s_temporary_on_this_host_is_swept(tmp_path):
    """A SIGKILLed writer leaves its hidden temporary; the sweep removes it, but not a
    live process's, another host's (a shared folder) or an older name it cannot read."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    host = socket.gethostname()
    names = {"dead": f".r-000003.parquet.{host}.{dead}.tmp",
             "live": f".r-000004.parquet.{host}.{os.getpid()}.tmp",
             "other host": f".r-000005.parquet.node-b.{dead}.tmp",
             "unreadable": ".r-000006.parquet.9.tmp",
             "whole": "r-000002.parquet"}
    for name in names.values():
        (tmp_path / name).write_bytes(b"x")
    assert sweep_stale_temporaries(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        name for key, name in names.items() if key != "dead")


@pytest.mark.parametrize("value, cell", [
    (None, ""), (3, "3"), ("a|b", "a\\|b"), ("back\\slash", "back\\\\slash"),
    ("two\r\nlines", "two<br>lines"), (["x", "y|z"], '["x", "y\\|z"]'),
])
def test_md_cell_keeps_a_value_in_its_cell(value, cell):
    assert md_cell(value) == cell
