"""`fragility-tui [--db PATH]` opens the app without building the subcommands' parser:
it must read those arguments exactly as the full parser does, and leave everything else
to it."""

from __future__ import annotations

import pytest

from fragility_tui.cli import app_only, build_parser


@pytest.mark.parametrize("argv", [[], ["--db", "s.duckdb"], ["--db=s.duckdb"],
                                  ["--db", "dir with space/s.duckdb"]])
def test_the_app_arguments_read_as_the_full_parser_reads_them(argv):
    assert vars(app_only(argv)) == vars(build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", [["--db"], ["--db="], ["--db", "-x"], ["--version"],
                                  ["report"], ["--db", "s.duckdb", "report"], ["-h"]])
def test_anything_else_goes_to_the_full_parser(argv):
    assert app_only(argv) is None
