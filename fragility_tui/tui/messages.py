"""The app's messages. Workers report results; panes and screens say what the user wants
(intents) and the app acts on them. The app hands state down as reactive attributes (the
open grid, its view, the grid list): messages up, attributes down."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # not imported before the app's first frame
    from fragility_tui.store.runs import RunRecord


# ---------------------------------------------------------------- from workers
@dataclass
class GridsListed(Message):
    grids: list


@dataclass
class ViewReady(Message):
    view: object  # view_model.GridView
    seconds: float


@dataclass
class WorkFailed(Message):
    what: str
    error: str


@dataclass
class PaneMounted(Message):
    """A pane composed after the first frame is ready to be shown."""

    pane_id: str


# ---------------------------------------------------------------- intents
@dataclass
class GridChosen(Message):
    """Open this grid and show its Bands."""

    name: str


class GridsChanged(Message):
    """The store's grids may have changed: list them again."""


@dataclass
class RunsWrote(Message):
    """Runs wrote cells into these grids: list the grids again, reload the open one."""

    grids: set


@dataclass
class ShowModel(Message):
    model: str


@dataclass
class ShowPair(Message):
    a: str
    b: str


@dataclass
class ShowItem(Message):
    item_uid: str


@dataclass
class ShowRun(Message):
    run: RunRecord


@dataclass
class CompareQueued(Message):
    """The user asked for this comparison (the Compare form, tui/panes/compare_form.py):
    start both runs, open Compare on the pair."""

    plan: object  # tui.panes.run_form.ComparePlan
