"""The eight panes, in digit-key order."""

from fragility_tui.tui.panes.axes import AxesPane
from fragility_tui.tui.panes.bands import BandsPane
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.panes.compare import ComparePane
from fragility_tui.tui.panes.compression import CompressionPane
from fragility_tui.tui.panes.grids import GridsPane
from fragility_tui.tui.panes.items import ItemsPane
from fragility_tui.tui.panes.pairs import PairsPane
from fragility_tui.tui.panes.runs import RunsPane

PANES: tuple[type[Pane], ...] = (GridsPane, BandsPane, PairsPane, ItemsPane, AxesPane,
                                 CompressionPane, RunsPane, ComparePane)

__all__ = ["PANES", "Pane"]
