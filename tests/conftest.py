"""Shared fixtures; the helpers themselves live in tests/helpers.py."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import REPO, built_once, require_shared_benchmarks, run_cli  # noqa: E402

# `make test` runs two workers on two cores. torch's OpenMP threads spin while they wait, so
# a 2-thread forward whose second core is taken by the other worker ran 4.4x slower than
# alone; passive waiting brings it to a 1-thread forward's speed (a scratch probe, 2026-12-04).
# Set before torch loads, in this process and every process a test starts.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The same for numpy's OpenBLAS, whose threads spin ~0.1 s after every call: the CLI sets
# this before numpy loads (cli.quiet_blas_threads), so the app and every command ran with
# it, but the test processes themselves (the in-process analysis and app tests) did not.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
# Textual's pilot waits for the app to go idle after every key it presses and at every
# pause: it sleeps in steps of textual._wait.SLEEP_GRANULARITY (20 ms) until a step used next
# to no CPU, twice a key. The pilot tests spent a third of their wall time in those sleeps
# (five pilot files alone: 89 -> 60 s with 5 ms steps, the same CPU; 2026-12-06); the
# screen's message queues are still drained first (Pilot._wait_for_screen), as before.
import textual._wait  # noqa: E402

textual._wait.SLEEP_GRANULARITY = 0.005
# The user data folder (default store, run event logs, a launcher's parts) of this process and
# the test processes the tests start: one per `pytest` run (its workers inherit it), not the
# contributor's own (~/.local/share/fragility-tui had gathered ~1,400 event logs from `make
# test`); removed when the run ends.
if "FRAGILITY_TESTS_OWN_DATA" not in os.environ:
    import atexit
    import tempfile

    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="fragility-tests-data-")
    os.environ["FRAGILITY_TESTS_OWN_DATA"] = os.environ["XDG_DATA_HOME"]
    atexit.register(shutil.rmtree, os.environ["XDG_DATA_HOME"], True)


def pytest_configure(config):
    config.addinivalue_line("markers", "starts_first(rank=1): a long test the run starts with, "
                                       "lower ranks first (pytest_collection_modifyitems)")
    if not hasattr(config, "workerinput"):  # once, before any pytest-xdist worker starts
        compile_bytecode()


def pytest_collection_modifyitems(config, items):
    """Tests marked starts_first go first, by rank. pytest-xdist's worksteal hands
    each worker half of the collection in order and balances by stealing from the tails: the
    SmolLM2 reference check (~340 s of a 16-minute run) sat at 72% of the collection, in the
    second worker's share behind ~400 s of runner tests, so the run ended with it while the
    other worker had nothing left. Started first, the other tests fill the other worker
    meanwhile (rank 0). The other tests of 12 s or more go first too (rank 1): one of them
    started last had left the other worker idle for the run's last ~25 s. Every worker
    collects and reorders alike, as pytest-xdist requires."""
    def rank(item) -> int:
        marker = item.get_closest_marker("starts_first")
        return marker.args[0] if marker.args else 1

    first = sorted((item for item in items if item.get_closest_marker("starts_first")), key=rank)
    if first:
        items[:] = first + [item for item in items if item not in first]


def compile_bytecode() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (this VM; some CI images) no process writes
    bytecode, so each of the ~300 processes the suite starts (CLI calls, runs, the app's
    launches, the GPU check's dry run) compiled the project's modules it imports from
    source again: 0.08 of a CLI call's 0.4 CPU-s. Written here once, a no-op when current,
    as `make run` does for the app; test modules are left to pytest's assertion rewriting."""
    if not sys.dont_write_bytecode:
        return  # every process writes what it compiles
    import compileall
    import re

    for folder in ("fragility_tui", "runners", "benchmarks", "tests"):
        compileall.compile_dir(REPO / folder, quiet=1,
                               rx=re.compile(r"(^|/)(test_[^/]*|conftest)\.py$"))


@pytest.fixture
def shared_benchmarks() -> Path:
    return require_shared_benchmarks()


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def samples_template(tmp_path_factory) -> Path:
    """A store as `fragility-tui load-samples --db` leaves it (the shipped grids,
    synthetic-12x3679 and starter-real with its runs), built once per pytest run (built_once)
    with the call that command makes. Never written: tests take a copy (`samples_db`, or
    shutil.copyfile in a module fixture). Tests of `load-samples` itself run the command."""
    from fragility_tui.store.sample_grids import load_sample_grids
    from fragility_tui.store.store import Store

    def build(folder: Path) -> None:
        assert load_sample_grids(Store(folder / "samples.duckdb")) == [
            "synthetic-12x3679", "starter-real"]

    return built_once(tmp_path_factory, "samples", build) / "samples.duckdb"


@pytest.fixture
def samples_db(tmp_path, samples_template) -> Path:
    """A store of this test's own holding the shipped grids (a copy of samples_template;
    the store keeps no file open between operations)."""
    path = tmp_path / "samples.duckdb"
    shutil.copyfile(samples_template, path)
    return path
