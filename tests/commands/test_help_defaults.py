"""Issue 44: `--help` states real defaults: `selfcheck --help` printed `(default None)` for
--boot, whose default depends on --full."""

from __future__ import annotations

import argparse

from fragility_tui.cli import build_parser
from fragility_tui.commands.selfcheck import FULL, QUICK


def subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from subparsers(sub)


def test_no_help_says_default_none():
    for name, sub in subparsers(build_parser()):
        assert "(default None)" not in sub.format_help(), name


def test_selfcheck_help_gives_the_boot_and_seed_defaults():
    sub = dict(subparsers(build_parser()))["selfcheck"]
    text = " ".join(sub.format_help().split())
    assert f"bootstrap resamples (default {QUICK[1]}; --full: {FULL[1]})" in text
    assert "random seed (default 0)" in text
