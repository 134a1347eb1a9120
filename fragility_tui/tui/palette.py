"""The command palette's entries (ctrl+p): panes, selections, copy/export, help. Kept out of
app.py so the app holds state and intents only; each entry calls one action of `app`
(tui/app.FragilityApp, which imports this module)."""

from __future__ import annotations

from typing import Iterable

from textual.app import SystemCommand

from fragility_tui.tui.compare_runs import open_compare_form
from fragility_tui.tui.panes import PANES
from fragility_tui.tui.selection import Selection


def app_commands(app) -> Iterable[SystemCommand]:
    for k, p in enumerate(PANES):
        yield SystemCommand(f"Pane: {p.title} ({k + 1})", p.help,
                            lambda pid=p.pane_id: app.action_pane(pid))
    yield SystemCommand("Selection: choose configs, models, benchmarks",
                        "Every pane recomputes for the selection", app.action_selection)
    yield SystemCommand("Selection: reset to everything", "All configs, models, benchmarks",
                        lambda: app._selection_done(Selection()))
    yield SystemCommand("Selection: generation configs only",
                        "Drop the two cloze likelihood configs",
                        lambda: select_configs(app, "generate"))
    yield SystemCommand("Selection: reference neighbourhood of order",
                        "o0…o5 × letter × generate", lambda: select_configs(app, "letter"))
    yield SystemCommand("Compare in one go: run two models and compare them",
                        "Model A, model B or A's int8/int4 build, items, grid, device: both "
                        "runs queued, Compare opens on the pair", lambda: open_compare_form(app))
    yield SystemCommand("Copy table", "Copy the current table (OSC 52)", app.action_copy_table)
    yield SystemCommand("Export table", "CSV, Parquet or Markdown", app.action_export)
    yield SystemCommand("SVG screenshot", "Save the screen as SVG", app.action_svg_screenshot)
    yield SystemCommand("Help: every binding", "F1 or ?", app.action_help)


def select_configs(app, group: str) -> None:
    if app.view is None:
        return
    from fragility_tui.harness.configs import parse_config_list

    wanted = [c for c in parse_config_list(group) if c in app.view.full.configs]
    app._selection_done(Selection(tuple(wanted), app.selection.models, app.selection.benchmarks))
