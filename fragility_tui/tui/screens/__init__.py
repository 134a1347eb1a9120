"""Screens pushed over the panes: drill-downs (Enter pushes, Esc pops) and modal forms."""

from __future__ import annotations

from textual.screen import Screen

from fragility_tui.tui.messages import ShowItem, ShowModel, ShowPair, ShowRun
from fragility_tui.tui.screens.base import DrillScreen
from fragility_tui.tui.screens.drilldowns import ModelScreen, PairScreen
from fragility_tui.tui.screens.forms import ExportScreen, HelpScreen, SelectionScreen
from fragility_tui.tui.screens.item import ItemScreen
from fragility_tui.tui.screens.provenance import ProvenanceScreen

__all__ = ["DrillScreen", "ExportScreen", "HelpScreen", "ItemScreen", "ModelScreen",
           "PairScreen", "ProvenanceScreen", "SelectionScreen", "drill_screen"]


def drill_screen(message: ShowModel | ShowPair | ShowItem | ShowRun, view,
                 gateway) -> Screen:
    """The drill-down a pane asked for, over the open grid's view."""
    if isinstance(message, ShowModel):
        return ModelScreen(view, message.model)
    if isinstance(message, ShowPair):
        return PairScreen(view, message.a, message.b)
    if isinstance(message, ShowItem):
        return ItemScreen(view, gateway, message.item_uid)
    return ProvenanceScreen(message.run)
