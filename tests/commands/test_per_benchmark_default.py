"""Issue 44: `run --per-benchmark` and the app's run forms agree on the default sample.
The CLI keeps SPEC §1's N = 1000 per benchmark (0 = all); an empty "per bench" field in the
Runs pane's form or the Compare pane's pair form leaves the flag out, so its placeholder
must say that default (it said "all items")."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import run_cli

from fragility_tui.items.item import DEFAULT_PER_BENCHMARK
from fragility_tui.tui.panes.run_form import run_argv

PANES = Path(__file__).resolve().parents[2] / "fragility_tui" / "tui" / "panes"


def test_run_help_states_the_default():
    text = " ".join(run_cli("run", "--help", check=True).stdout.split())
    assert f"(default {DEFAULT_PER_BENCHMARK}; 0 = all)" in text


def test_an_empty_form_field_leaves_the_cli_default_and_the_placeholder_says_it():
    assert "--per-benchmark" not in run_argv({"model": "m", "per_benchmark": ""}, None)
    assert "--per-benchmark 0 " in " ".join(run_argv({"model": "m", "per_benchmark": "0"},
                                                     None)) + " "  # 0: all items
    for source, field in (("runs.py", "run-sample"), ("compare_form.py", "cf-sample")):
        text = (PANES / source).read_text()
        placeholder = re.search(rf'placeholder="([^"]*)", id="{field}"', text).group(1)
        assert str(DEFAULT_PER_BENCHMARK) in placeholder and "all" in placeholder, placeholder
        assert placeholder != "all items"


def test_the_readme_tour_states_the_default_the_aliases_and_how_long_a_run_takes():
    from fragility_tui.model_aliases import ALIASES

    readme = (PANES.parents[2] / "README.md").read_text()
    tour = " ".join(readme.split("## A five-minute tour")[1].split("## Command line")[0].split())
    assert f"up to {DEFAULT_PER_BENCHMARK} items per benchmark" in tour
    for alias in ALIASES:
        assert f"`{alias}`" in tour
    # how long a first run takes, as measured (the README says when and on what)
    assert "offline machine" in tour and re.search(r"`--per-benchmark 1` \(4 items × 26 "
                                                   r"configs\) took \d+ s", tour)
    assert re.search(r"the 40-item command above \d+ s", tour)
