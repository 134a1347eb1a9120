"""The README must not drift from the CLI: documented commands and flags exist in --help,
and the quick start's make targets exist."""

from __future__ import annotations

import re

import pytest

from helpers import REPO, run_cli

README = (REPO / "README.md").read_text()
DOCUMENTED = re.findall(r"`fragility-tui ([a-z][a-z-]*)((?: [^`]*)?)`", README)


def test_quick_start_is_two_make_targets_that_exist():
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^(make \w+)", quick, flags=re.M)
    assert commands == ["make run", "make test"]
    makefile = (REPO / "Makefile").read_text()
    for cmd in commands:
        assert re.search(rf"^{cmd.split()[1]}:", makefile, flags=re.M), cmd
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_readme_documents_commands():
    assert len({sub for sub, _ in DOCUMENTED}) >= 8


@pytest.mark.parametrize("sub, rest", DOCUMENTED, ids=[f"{s}{r}"[:60] for s, r in DOCUMENTED])
def test_documented_flags_exist_in_help(sub, rest):
    words = sub.split() + [w for w in rest.split() if re.fullmatch(r"[a-z-]+", w)][:1]
    proc = run_cli(sub, "--help")
    if proc.returncode != 0:  # e.g. "runs" needs its action: take the first documented one
        proc = run_cli(*words, "--help")
    assert proc.returncode == 0, proc.stderr
    helptext = proc.stdout
    flags = set(re.findall(r"(--[a-z][a-z-]*)", rest))
    for flag in flags:
        if flag not in helptext:  # flags of an action (runs show --json) live one level down
            nested = run_cli(*words, "--help").stdout
            assert flag in nested, f"README documents `fragility-tui {sub} {flag}`, --help lacks it"
