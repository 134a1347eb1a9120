"""Screens pushed over the panes: drill-downs (Enter pushes, Esc pops) and modal forms."""

from fragility_tui.tui.screens.base import DrillScreen
from fragility_tui.tui.screens.drilldowns import ModelScreen, PairScreen
from fragility_tui.tui.screens.forms import ExportScreen, HelpScreen, SelectionScreen
from fragility_tui.tui.screens.item import ItemScreen
from fragility_tui.tui.screens.provenance import ProvenanceScreen

__all__ = ["DrillScreen", "ExportScreen", "HelpScreen", "ItemScreen", "ModelScreen",
           "PairScreen", "ProvenanceScreen", "SelectionScreen"]
