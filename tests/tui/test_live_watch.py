"""The live grid's watcher (tui/live.py) against a scripted store: which polls post
GridWritten. Its baseline is taken when the app reads the grid, so a run that commits after
that read and ends before the next poll still makes the app reload (a CI run of the Compare
form's two tiny runs finished between the read and the first poll, and the Compare pane kept
the grid as first read)."""

from __future__ import annotations

from fragility_tui.store.runs import RunRecord, RunStatus
from fragility_tui.tui.live import GridWritten, LiveGrid


class FakeGateway:
    def __init__(self):
        self.records: list[RunRecord] = []
        self.fail = False

    def runs(self) -> list[RunRecord]:
        if self.fail:
            raise OSError("the store is locked")
        return list(self.records)


class FakeApp:
    def __init__(self):
        self.gateway = FakeGateway()
        self.grid_name = "pair"
        self.posted: list = []

    def post_message(self, message) -> None:
        self.posted.append(message)


def run(run_id: str, done: int, status: str = RunStatus.FINISHED, grid: str = "pair"):
    return RunRecord(run_id, grid=grid, status=status, cells_done=done, cells_total=24)


def reloads(app: FakeApp) -> int:
    return sum(isinstance(m, GridWritten) for m in app.posted)


def test_a_run_that_ends_between_the_read_and_the_first_poll_reloads():
    app = FakeApp()
    watcher = LiveGrid(app)
    app.gateway.records = [run("a", 0, RunStatus.QUEUED)]
    watcher.baseline("pair")  # the app reads the grid: no cells yet
    app.gateway.records = [run("a", 24)]  # committed and finished before any poll
    watcher._compare_counts("pair")
    assert reloads(app) == 1
    watcher._compare_counts("pair")  # nothing new
    assert reloads(app) == 1


def test_a_run_that_starts_and_ends_between_two_polls_reloads():
    app = FakeApp()
    watcher = LiveGrid(app)
    app.gateway.records = [run("old", 24), run("elsewhere", 3, grid="other")]
    watcher.baseline("pair")
    watcher._compare_counts("pair")
    assert reloads(app) == 0  # finished runs as read: nothing to reload
    app.gateway.records.append(run("b", 24))  # never seen running
    watcher._compare_counts("pair")
    assert reloads(app) == 1


def test_without_a_baseline_the_first_poll_only_learns():
    app = FakeApp()
    watcher = LiveGrid(app)
    app.gateway.fail = True
    watcher.baseline("pair")  # a busy store: no baseline, and no error raised
    app.gateway.fail = False
    app.gateway.records = [run("a", 12, RunStatus.FINISHED)]
    watcher._compare_counts("pair")
    assert reloads(app) == 0
    app.gateway.records = [run("a", 12), run("b", 5, RunStatus.FAILED)]
    watcher._compare_counts("pair")
    assert reloads(app) == 1
