"""Issue 60: `report` never cuts a verdict label or a model name (it printed
`harness-…nsitive` and `smollm2…ct+int4` even when piped or at COLUMNS=200); piped, it cuts
nothing at all (a script reads it); one minus sign throughout, the ASCII one (a row read
`-0.4 [−6.0, 4.9]`); `--pair` with an unknown model lists the known ones."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys

import pytest

from helpers import REPO, run_cli

PAIR = "smollm2-135m-instruct,smollm2-135m-instruct+int4"  # a named pair: negative delta
ARGS = ("report", "--grid", "starter-real", "--boot", "50", "--random-draws", "20",
        "--pair", PAIR)


@pytest.fixture(scope="module")
def db(tmp_path_factory, samples_template):
    """The shipped grids as `load-samples` leaves them (tests/conftest.py)."""
    path = tmp_path_factory.mktemp("uncut") / "s.duckdb"
    shutil.copyfile(samples_template, path)
    return path


def run_on_a_terminal(db, columns: int) -> str:
    """The report as a user at a terminal `columns` wide sees it (stdout a pty)."""
    master, slave = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": str(columns)}
    proc = subprocess.Popen([sys.executable, "-m", "fragility_tui.cli", *ARGS, "--db", str(db)],
                            stdout=slave, stderr=slave, env=env, cwd=REPO)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def names_and_labels(db) -> tuple[set[str], set[str]]:
    doc = json.loads(run_cli(*ARGS, "--json", db=db, check=True).stdout)
    models = {b["model"] for b in doc["bands"]}
    labels = {d["label"] for d in doc["decisions"]} | {p["verdict"] for p in doc["pairs"]}
    return models, labels


def table_rows(text: str, title: str) -> list[str]:
    lines = text.split(title, 1)[1].split("\n\n", 1)[0].splitlines()
    return lines[3:]  # after the title's rest, its underline and the column heads


def check_whole(text: str, models: set[str], labels: set[str]) -> None:
    assert "…" not in text  # no cell cut anywhere
    words = set(text.replace(",", " ").split())
    assert models <= words and labels <= words, (models - words, labels - words)
    assert "\u2212" not in text  # one minus sign: ASCII, so grep finds -0.4 and [-6.0, 4.4]


def test_piped_nothing_is_cut_and_one_row_is_one_line(db):
    models, labels = names_and_labels(db)
    assert any("+int4" in m for m in models)
    for columns in ("80", "200"):
        text = run_cli(*ARGS, db=db, env={"COLUMNS": columns}, check=True).stdout
        check_whole(text, models, labels)
        rows = table_rows(text, "Decisions at")
        rows = rows[:rows.index(next(r for r in rows if r.startswith("more flags")))]
        assert len(rows) == 8 and all(len(r.split()) >= 9 for r in rows)  # A B target ... label
        assert any(" -0." in r and "[-" in r for r in rows)  # the named pair's negative delta


@pytest.mark.parametrize("columns", [80, 200])
def test_on_a_terminal_names_and_labels_are_whole_and_lines_fit(db, columns):
    models, labels = names_and_labels(db)
    text = run_on_a_terminal(db, columns)
    check_whole(text, models, labels)
    assert max(map(len, text.splitlines())) <= columns
    if columns == 200:  # wide enough: every decision on one line
        rows = table_rows(text, "Decisions at")
        assert all(r.split()[2] in ("observed", "balanced") for r in rows[:8])


def test_pair_with_an_unknown_model_lists_the_known_ones(db):
    proc = run_cli("report", "--grid", "starter-real", "--pair", "nosuch,gemma3-270m", db=db)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "nosuch" in proc.stderr and "known: gemma3-270m, smollm2-135m-instruct," in proc.stderr
