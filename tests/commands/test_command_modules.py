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
