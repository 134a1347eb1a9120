"""The command palette's entries (ctrl+p): panes, selections, copy/export, help. Kept out of
app.py so the app holds state and intents only; each entry calls one method of the app that
`PaletteHost` names (tui/app.FragilityApp imports this module)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Protocol

from textual.app import SystemCommand

from fragility_tui.tui.compare_runs import CompareHost, open_compare_form
from fragility_tui.tui.panes import PANES
from fragility_tui.tui.selection import Selection

if TYPE_CHECKING:
    from fragility_tui.tui.session import GridSession
    from fragility_tui.tui.view_model import GridView


class PaletteHost(CompareHost, Protocol):
    """The app as the palette's entries call it."""

    view: GridView | None
    session: GridSession

    def choose_selection(self, selection: Selection | None) -> None: ...
    def action_selection(self) -> None: ...
    def action_copy_table(self) -> None: ...
    def action_export(self) -> None: ...
    def action_svg_screenshot(self) -> None: ...
    def action_help(self) -> None: ...


def app_commands(app: PaletteHost) -> Iterable[SystemCommand]:
    for k, p in enumerate(PANES):
        yield SystemCommand(f"Pane: {p.title} ({k + 1})", p.help,
                            lambda pid=p.pane_id: app.action_pane(pid))
    yield SystemCommand("Selection: choose configs, models, benchmarks",
                        "Every pane recomputes for the selection", app.action_selection)
    yield SystemCommand("Selection: reset to everything", "All configs, models, benchmarks",
                        lambda: app.choose_selection(Selection()))
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


def select_configs(app: PaletteHost, group: str) -> None:
    if app.view is None:
        return
    from fragility_tui.harness.configs import parse_config_list

    wanted = [c for c in parse_config_list(group) if c in app.view.full.configs]
    chosen = app.session.selection
    app.choose_selection(Selection(tuple(wanted), chosen.models, chosen.benchmarks))
