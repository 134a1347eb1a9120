"""Issue 24 (6): every table `report --markdown` prints is a table wherever Markdown is
rendered: each row has as many cells as the separator (the Pairs header's |S| was not
escaped, giving 14 cells over a 12-cell separator)."""

from __future__ import annotations

from helpers import run_cli


def md_cells(line: str) -> int:
    """Cells of a Markdown table row: pipes not escaped by a backslash delimit them."""
    count, escaped = 0, False
    for ch in line.strip()[1:]:  # after the leading pipe
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "|":
            count += 1
    return count


def test_every_markdown_table_has_equal_cells_per_row(tmp_path):
    db = tmp_path / "s.duckdb"
    run_cli("simulate", "--models", "4", "--items", "40", "--seed", "2", "--grid", "sim",
            db=db, check=True)
    out = run_cli("report", "--grid", "sim", "--markdown", db=db, check=True).stdout
    tables, current = [], []
    for line in out.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    assert len(tables) >= 5
    pairs = next(t for t in tables if "\\|S\\|" in t[0])
    assert pairs, "the Pairs table names |S| (escaped)"
    for table in tables:
        separator = md_cells(table[1])
        assert set(table[1].replace("|", "")) == {"-"}
        assert [md_cells(r) for r in table] == [separator] * len(table), table[0]
