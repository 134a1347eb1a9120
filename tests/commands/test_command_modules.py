"""The CLI registers every command module it lists; one that cannot be imported is an error,
not a command that silently disappears from --help."""

from __future__ import annotations

import pytest

from fragility_tui import cli


def test_every_listed_command_module_registers_a_subcommand():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"run", "report", "grids", "runs", "calibrate", "selfcheck"} <= set(sub.choices)


def test_a_command_module_that_cannot_be_imported_fails_loudly(monkeypatch):
    monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES,
                                                 "fragility_tui.commands.not_there"))
    with pytest.raises(ModuleNotFoundError, match="not_there"):
        cli.build_parser()


def test_each_command_maps_to_the_module_that_registers_it():
    """`fragility-tui CMD` registers only COMMAND_OF[CMD]: the table must name every
    command each module registers, and nothing else."""
    registered = {}
    for name in cli.COMMAND_MODULES:
        sub = next(a for a in cli.build_parser((name,))._actions if a.dest == "command")
        registered.update(dict.fromkeys(sub.choices, name))
    assert registered == cli.COMMAND_OF


@pytest.mark.parametrize("argv, module", [
    (["report", "--grid", "g"], "fragility_tui.commands.report"),
    (["--db", "x.duckdb", "runs", "list"], "fragility_tui.commands.runs"),
    (["--db=x.duckdb", "simulate"], "fragility_tui.commands.grid_commands"),
    (["--help"], None), (["--version"], None), (["reprot"], None), ([], None),
    (["--db"], None),
])
def test_only_the_named_commands_module_is_registered(argv, module):
    assert cli.command_modules(argv) == (None if module is None else (module,))


def test_a_command_parses_the_same_with_its_module_alone():
    argv = ["--db", "x.duckdb", "report", "--grid", "g", "--json", "--pair", "a,b"]
    assert (cli.build_parser(cli.command_modules(argv)).parse_args(argv)
            == cli.build_parser().parse_args(argv))
