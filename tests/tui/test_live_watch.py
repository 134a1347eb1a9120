"""The live grid's watcher (tui/live.py) against a scripted store: which polls post
GridWritten. Its baseline is taken when the app reads the grid, so a run that commits after
that read and ends before the next poll still makes the app reload (a CI run of the Compare
form's two tiny runs finished between the read and the first poll, and the Compare pane kept
the grid as first read)."""

from __future__ import annotations

import os

import pytest

from fragility_tui.store.runs import RunRecord, RunStatus
from fragility_tui.tui import live
from fragility_tui.tui.live import GridWritten, LiveGrid


class FakeGateway:
    def __init__(self, path: str | None = None):
        self.records: list[RunRecord] = []
        self.fail = False
        self.path = path
        self.reads = 0

    def runs(self) -> list[RunRecord]:
        self.reads += 1
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


@pytest.fixture
def store_files(tmp_path):
    db = tmp_path / "s.duckdb"
    db.write_bytes(b"x" * 10)
    return db


def test_an_idle_grid_is_not_read_again_until_the_store_changes(store_files, monkeypatch):
    """Polls skip the query while no run of the grid is active and the store's file and its
    write-ahead log are untouched (a DuckDB connection a second was ~2% of a core for an
    idle app); a commit to either file, or FULL_CHECK_SECONDS, brings the read back."""
    app = FakeApp()
    app.gateway = FakeGateway(str(store_files))
    watcher = LiveGrid(app)
    app.gateway.records = [run("a", 24)]
    watcher.baseline("pair")
    for _ in range(3):
        watcher._check("pair")
    assert app.gateway.reads == 1
    wal = store_files.with_name(store_files.name + ".wal")
    app.gateway.records.append(run("b", 24))  # a run that came and went between two polls
    wal.write_bytes(b"commit")
    watcher._check("pair")
    assert app.gateway.reads == 2 and reloads(app) == 1
    watcher._check("pair")
    assert app.gateway.reads == 2
    os.utime(store_files, ns=(1, 1))  # a checkpoint rewrites the file
    watcher._check("pair")
    assert app.gateway.reads == 3
    monkeypatch.setattr(live, "FULL_CHECK_SECONDS", 0.0)
    watcher._check("pair")
    assert app.gateway.reads == 4


def test_an_active_run_and_another_grid_are_read_every_poll(store_files):
    """An active run's count comes from its events file, which the store's stamp does not
    see; a grid switched to has no counts yet."""
    app = FakeApp()
    app.gateway = FakeGateway(str(store_files))
    watcher = LiveGrid(app)
    app.gateway.records = [run("a", 5, RunStatus.RUNNING)]
    watcher.baseline("pair")
    watcher._check("pair")
    watcher._check("pair")
    assert app.gateway.reads == 3
    app.gateway.records = [run("a", 24)]
    watcher._check("pair")  # learns it finished
    watcher._check("pair")
    assert app.gateway.reads == 4
    watcher._check("other")
    assert app.gateway.reads == 5


def test_without_a_known_store_path_every_poll_reads():
    app = FakeApp()
    watcher = LiveGrid(app)
    watcher.baseline("pair")
    watcher._check("pair")
    watcher._check("pair")
    assert app.gateway.reads == 3
