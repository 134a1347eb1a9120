"""Compare in one go (issue 22): the app's side of a Compare form. Both runs start as
detached processes through the Runs pane (the device slots queue the second when both want
one one-slot device); the Compare pane is told the pair and opens on it once the grid holds
cells of both (with "stop when settled", one `fragility-tui compare` process, which
the Compare pane follows: panes/compare_sequence.py); a grid the runs are about to create
is looked for every few seconds and opened when the first run has made it. The live watcher (live.py) then reloads it as their
batches commit. Kept out of app.py, which holds state and intents only; what it needs of the
app is `CompareHost`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from textual.screen import Screen

    from fragility_tui.tui.pane_switcher import PaneSwitcher
    from fragility_tui.tui.panes.run_form import ComparePlan
    from fragility_tui.tui.sequence import SequencePlan

AWAIT_GRID_SECONDS = 2.0  # how often a Compare form's new grid is looked for


class CompareHost(Protocol):
    """The app (tui/app.FragilityApp) as a Compare form's runs use it."""

    grid_name: str | None
    screen: Screen

    @property
    def panes(self) -> PaneSwitcher: ...
    def action_pane(self, pane_id: str) -> None: ...
    def list_grids(self) -> object: ...
    def open_grid(self, name: str) -> None: ...
    def set_timer(self, delay: float, callback: Callable[[], object]) -> object: ...


class CompareRuns:
    def __init__(self, app: CompareHost):
        self.app = app
        self.awaited: str | None = None  # a Compare form's grid, until it exists
        self.started: tuple = ()  # (process, log, what) the last Compare form started
        self.last_look = False  # every started process has ended: one listing more

    def start(self, plan: ComparePlan | SequencePlan) -> None:
        """Launch the plan's two runs (or its one sequential comparison), open Compare on
        the pair."""
        from fragility_tui.tui.panes import ComparePane, RunsPane  # loaded after the first frame

        app, runs = self.app, self.app.panes.pane_of(RunsPane)
        compare = app.panes.pane_of(ComparePane)
        before = len(runs.launched)
        if hasattr(plan, "settings"):  # "stop when settled": one `compare` process
            tries = [runs.launch(list(plan.argv), f"start compare {plan.a} vs {plan.b} "
                                                  "(stop when settled)")]
            process = runs.launched[-1][0] if len(runs.launched) > before else None
            compare.follow(plan, process)  # the sequence, from the grid's cells
        else:
            tries = [runs.launch(list(plan.argv_a), f"start {plan.a} (compare A)"),
                     runs.launch(list(plan.argv_b), f"start {plan.b} (compare B)")]
            # two plain runs: the full grid's decision, not a replayed sequence that reads
            # like a sequential result (the form may have been opened from the sequence view)
            compare.sequence_on = False
        self.started = tuple(runs.launched[before:])  # (process, log, what)
        not_started = [why for why in tries if why]  # why a launch failed
        compare.want(plan.grid, plan.a, plan.b, self.started, not_started)
        app.action_pane("compare")
        # opened once a run has created it; nothing will when no process started
        if plan.grid != app.grid_name and len(not_started) < len(tries):
            self.awaited, self.last_look = plan.grid, False
            self._look()

    def _look(self) -> None:
        """List the grids until the awaited one is there, or until one more listing after
        every started process has ended (a refused run never creates it)."""
        if self.awaited is None:
            return
        if self.last_look:
            self.awaited = None
            return
        # looked at before the listing, so that this listing comes after their end
        self.last_look = bool(self.started) and all(
            proc.poll() is not None for proc, _, _ in self.started)
        self.app.list_grids()  # listed(): opens it once it is there
        self.app.set_timer(AWAIT_GRID_SECONDS, self._look)

    def listed(self, grids: list) -> bool:
        """After the app lists its grids: True when this opened the awaited grid."""
        if self.awaited is None or not any(g.name == self.awaited for g in grids):
            return False
        name, self.awaited = self.awaited, None
        if name != self.app.grid_name:
            self.app.open_grid(name)
        return True


def open_compare_form(app: CompareHost) -> None:
    """The Compare form from the command palette (the Compare pane binds it to n)."""
    from textual.screen import ModalScreen

    from fragility_tui.tui.panes import ComparePane

    if isinstance(app.screen, ModalScreen):
        return  # another form or the help is open
    app.action_pane("compare")
    app.panes.pane_of(ComparePane).action_new_comparison()
