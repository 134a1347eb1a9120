"""Test helpers importable as `from helpers import ...` (a module name no conftest shadows)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (CI); a git worktree elsewhere names it in this variable.
SHARED_BENCHMARKS = Path(os.environ.get("FRAGILITY_TEST_SHARED_BENCHMARKS")
                         or REPO.parent / "shared" / "benchmarks")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_shared_benchmarks() -> Path:
    """The real benchmark files: skipped outside CI when absent, a failure under CI=true."""
    if not SHARED_BENCHMARKS.is_dir():
        if IN_CI:
            pytest.fail(f"CI=true but {SHARED_BENCHMARKS} is missing")
        pytest.skip(f"real benchmark data not found at {SHARED_BENCHMARKS}")
    return SHARED_BENCHMARKS


def run_cli(*args: str, db: Path | None = None, timeout: float = 120, env: dict | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
    """Run `fragility-tui ARGS` as a process of its own (the way a user or a script does;
    started warm, tests/cli_process.py)."""
    from cli_process import cli_run

    argv = [*args]
    if db is not None:
        argv += ["--db", str(db)]
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    proc = cli_run(argv, capture_output=True, text=True, timeout=timeout, env=full_env,
                   cwd=REPO)
    if check and proc.returncode != 0:
        raise AssertionError(f"fragility-tui {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def count_calls(monkeypatch, module, *names: str) -> dict[str, int]:
    """Count calls of `module`'s functions `names` from anywhere in fragility_tui: every
    loaded fragility_tui module that holds one of them (imported by name) gets a counting
    wrapper. Returns the live {name: calls} dict."""
    counts = dict.fromkeys(names, 0)
    for name in names:
        original = getattr(module, name)

        def counted(*args, _original=original, _name=name, **kwargs):
            counts[_name] += 1
            return _original(*args, **kwargs)

        for mod in [m for k, m in sys.modules.items() if k.startswith("fragility_tui")]:
            if getattr(mod, name, None) is original:
                monkeypatch.setattr(mod, name, counted)
    return counts


def pause_outside_the_store(pid: int, db: Path) -> None:
    """SIGSTOP process `pid` at a moment it holds no connection to the store, so checks (and
    a cancel) can run before a fast machine finishes the run; SIGCONT it afterwards. A
    process stopped inside a write would keep the database locked."""
    import signal
    import time

    import duckdb

    for _ in range(500):
        os.kill(pid, signal.SIGSTOP)
        try:
            duckdb.connect(str(db), read_only=True).close()
            return
        except duckdb.Error:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.01)
    raise AssertionError(f"process {pid} never paused outside a store transaction")


STARTER_ITEMS = REPO / "sample_grids" / "starter_items.jsonl"


def import_logs(db: Path, *paths, check: bool = True, extra=()):
    """`import-log PATH… --grid g --items <starter items> --json`: the runs' summaries, or
    (check=False) the finished process."""
    import json

    proc = run_cli("import-log", *map(str, paths), "--grid", "g", "--items",
                   str(STARTER_ITEMS), "--json", *extra, db=db)
    if check:
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["runs"]
    return proc


def process_memory_limit() -> str:
    """DuckDB's memory limit in this process (one instance: every store operation's)."""
    from fragility_tui.store import connection

    return connection._host_connection().execute(
        "SELECT current_setting('memory_limit')").fetchall()[0][0]


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `build(folder)` filled, built once per pytest run by whichever test process
    asks first; pytest-xdist's other workers wait for it (a file lock) and share it. Each
    worker built its own session templates before (the shipped grids' store alone ~6 CPU-s).
    Read-only for the tests: they copy what they write to. A build that failed is retried."""
    import fcntl
    import shutil

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # this run's folder; the workers' own (popen-gwN) are inside it
    folder = base / f"built-{name}"
    with open(base / f"built-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder
