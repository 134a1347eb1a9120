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


# -- a big log is parsed in a child process (imports/worker.py) -------------------------


@pytest.fixture
def in_a_child(monkeypatch):
    """Every lm-eval file read by the child process, whatever its size."""
    from fragility_tui.imports import pipeline

    monkeypatch.setattr(pipeline, "worth_a_process", lambda path: True)


@pytest.mark.parametrize("chunk", [7, 10_000])
def test_a_log_read_in_a_child_gives_the_same_cells(tmp_path, monkeypatch, capsys, chunk):
    here = _import(tmp_path / "here.duckdb", LOGS / "mc", monkeypatch, chunk, capsys)
    from fragility_tui.imports import pipeline

    monkeypatch.setattr(pipeline, "worth_a_process", lambda path: True)
    child = _import(tmp_path / "child.duckdb", LOGS / "mc", monkeypatch, chunk, capsys)
    assert child == here and all(r["reproduces_log_accuracy"] for r in child)
    assert _cells(tmp_path / "child.duckdb") == _cells(tmp_path / "here.duckdb")


def _log_with(tmp_path, extra_lines: list[str]):
    src = next((LOGS / "mc").rglob("samples_*.jsonl"))
    folder = tmp_path / "log"
    folder.mkdir()
    shutil.copy(next(src.parent.glob("results*.json")), folder / "results_x.json")
    lines = src.read_text().splitlines()
    (folder / src.name).write_text("\n".join(lines + extra_lines) + "\n")
    return folder, lines


def test_a_bad_line_read_in_a_child_names_its_file_and_line(tmp_path, monkeypatch, capsys,
                                                            in_a_child):
    folder, _ = _log_with(tmp_path, ['{"doc": {"id": 1}, "arguments": 3, "acc": 1'])
    db = tmp_path / "s.duckdb"
    with pytest.raises(InputError, match=r"samples_.*\.jsonl:41: invalid JSON") as caught:
        _import(db, folder, monkeypatch, 7, capsys)
    assert caught.value.line == 41
    from fragility_tui.store.store import Store

    assert Store(db).list_grids() == []  # the chunks before it were not kept


def test_a_duplicate_read_in_a_child_is_refused(tmp_path, monkeypatch, capsys, in_a_child):
    folder, lines = _log_with(tmp_path, [])
    (next(folder.glob("samples_*.jsonl"))).write_text("\n".join(lines + [lines[3]]) + "\n")
    with pytest.raises(InputError, match=r"scored twice .*:4 and .*:41"):
        _import(tmp_path / "s.duckdb", folder, monkeypatch, 7, capsys)


def test_a_child_that_dies_is_an_error_with_its_exit_code(tmp_path, monkeypatch):
    from fragility_tui.imports.worker import read_chunks_in_process

    (tmp_path / "dies_on_import.py").write_text("import os\nos._exit(3)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"ended without a result \(exit code 3\)"):
        list(read_chunks_in_process("dies_on_import", tmp_path / "x.jsonl"))


def test_closing_early_stops_the_child(monkeypatch):
    from fragility_tui.imports import worker

    started = []
    real_popen = __import__("subprocess").Popen

    def recording(*a, **k):
        started.append(real_popen(*a, **k))
        return started[-1]

    monkeypatch.setattr("subprocess.Popen", recording)
    path = next((LOGS / "mc").rglob("samples_*.jsonl"))
    chunks = worker.read_chunks_in_process("fragility_tui.imports.lmeval_log", path, size=1)
    assert len(next(chunks)[0].samples) == 1
    chunks.close()
    assert started[0].poll() is not None  # ended, not left running


def test_an_input_error_survives_pickling():
    import pickle

    error = InputError("bad", path="f.jsonl", line=3, field="doc")
    back = pickle.loads(pickle.dumps(error))
    assert (str(back), back.path, back.line, back.field) == (str(error), "f.jsonl", 3, "doc")
