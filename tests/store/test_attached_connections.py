"""The store file attached to the process's one DuckDB instance per operation
(fragility_tui/store/connection.py): the file's lock goes when the last connection of the
process closes, two connections share one attachment, and a forked child neither uses nor
frees its parent's instance (freeing it aborted the child at exit)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fragility_tui.store import connection
from fragility_tui.store.store import Store
from helpers import process_memory_limit

OPENS_ELSEWHERE = ("import sys, _duckdb; _duckdb.connect(sys.argv[1]).close(); "
                   "print('opened')")


def another_process_opens(path) -> bool:
    done = subprocess.run([sys.executable, "-c", OPENS_ELSEWHERE, str(path)],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip() == "opened"


def test_the_file_is_locked_only_while_a_connection_is_open(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    with store.connect() as first:
        with store.connect() as second:  # the same attachment, a cursor of its own
            assert first.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]
            assert second.execute("SELECT count(*) FROM grids").fetchall() == [(0,)]
        assert list(connection._attached) == [os.path.abspath(store.path)]
        assert not another_process_opens(store.path)  # still attached for `first`
    assert connection._attached == {}
    assert another_process_opens(store.path)


FORKS = """
import os, sys
from fragility_tui.store.store import Store
store = Store(sys.argv[1])
store.create_grid("g", description="parent's")
pid = os.fork()
if pid == 0:  # the child ends through the interpreter's teardown, where a freed instance aborted
    assert [g.name for g in Store(sys.argv[1]).list_grids()] == ["g"]
    sys.exit(0)
_, status = os.waitpid(pid, 0)
idle = os.fork()  # a child that never opens the store
if idle == 0:
    sys.exit(0)
_, idle_status = os.waitpid(idle, 0)
assert [g.name for g in store.list_grids()] == ["g"]  # the parent's instance still works
print(os.waitstatus_to_exitcode(status), os.waitstatus_to_exitcode(idle_status))
"""


def test_a_forked_child_uses_its_own_instance_and_exits_cleanly(tmp_path):
    done = subprocess.run([sys.executable, "-c", FORKS, str(tmp_path / "s.duckdb")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "0"], done.stderr[-2000:]


def test_a_memory_limit_set_for_a_block_does_not_outlive_it(tmp_path):
    """merge and log imports cap DuckDB's memory while they write; the instance is the
    process's, so the cap must go with the block, also when its transaction failed (which
    refuses every statement until the rollback)."""
    store = Store(tmp_path / "s.duckdb")
    default = process_memory_limit()
    with pytest.raises(Exception, match="nonexistent"):
        with store.connect(write=True) as con, connection.memory_limit(con, "100MB"):
            assert process_memory_limit() != default
            con.execute("SELECT * FROM nonexistent")
    assert process_memory_limit() == default
    with store.connect() as con:
        assert con.execute("SELECT count(*) FROM grids").fetchall() == [(0,)]
