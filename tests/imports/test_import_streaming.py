"""import-log streams a big log a chunk at a time (imports/lmeval_log.py CHUNK lines): the
cells, the summary and every refusal are the same as when the whole log is read at once,
whatever the chunk size, including a duplicate sample on either side of a chunk boundary."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from fragility_tui.commands.import_log import cmd_import_log
from fragility_tui.errors import InputError
from fragility_tui.imports import lmeval_log
from helpers import REPO

LOGS = REPO / "tests" / "fixtures" / "logs" / "lmeval"


def _import(db, path, monkeypatch, chunk, capsys, **kw):
    monkeypatch.setattr(lmeval_log, "CHUNK", chunk)
    args = argparse.Namespace(db=str(db), paths=[str(path)], grid="g", model="m", items=None,
                              format=None, metric=None, replace=False, json=True, **kw)
    cmd_import_log(args)
    return json.loads(capsys.readouterr().out)["runs"]


def _cells(db):
    from fragility_tui.store.store import Store

    with Store(db).connect() as con:
        return con.execute("SELECT * EXCLUDE (run_id) FROM cells ORDER BY ALL").fetchall()


@pytest.mark.parametrize("chunk", [1, 7, 40])
def test_any_chunk_size_gives_the_whole_logs_cells(tmp_path, monkeypatch, capsys, chunk):
    whole = _import(tmp_path / "whole.duckdb", LOGS / "mc", monkeypatch, 10_000, capsys)
    parts = _import(tmp_path / "parts.duckdb", LOGS / "mc", monkeypatch, chunk, capsys)
    assert parts == whole and all(r["reproduces_log_accuracy"] for r in parts)
    assert _cells(tmp_path / "parts.duckdb") == _cells(tmp_path / "whole.duckdb")


def test_a_duplicate_across_a_chunk_boundary_is_refused_and_nothing_written(
        tmp_path, monkeypatch, capsys):
    src = next((LOGS / "mc").rglob("samples_*.jsonl"))
    folder = tmp_path / "log"
    folder.mkdir()
    shutil.copy(next(src.parent.glob("results*.json")), folder / "results_x.json")
    lines = src.read_text().splitlines()
    (folder / src.name).write_text("\n".join(lines + [lines[0]]) + "\n")  # line 41 = line 1
    db = tmp_path / "s.duckdb"
    with pytest.raises(InputError, match=r"scored twice .*:1 and .*:41"):
        _import(db, folder, monkeypatch, 7, capsys)
    from fragility_tui.store.store import Store

    assert Store(db).list_grids() == []
