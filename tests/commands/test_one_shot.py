"""ONE_SHOT commands (`report`) started as a process: their output is all there and their
exit status kept although the process ends without the interpreter's teardown, and glibc
keeps the memory they free for reuse (cli.reuse_freed_memory; docs/scale.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from fragility_tui import cli
from helpers import REPO, run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("one_shot") / "g.duckdb"
    run_cli("simulate", "--models", "4", "--items", "300", "--grid", "g", db=db, check=True)
    return db


@pytest.mark.parametrize("fmt", [["--json"], ["--markdown"], []])
def test_report_as_a_process_prints_all_of_its_output(store, capsys, fmt):
    """The same output as main() called in-process, which ends the ordinary way."""
    args = ["report", "--grid", "g", *fmt]
    done = run_cli(*args, db=store, check=True)
    assert cli.main([*args, "--db", str(store)]) == 0
    assert done.stdout == capsys.readouterr().out
    if fmt == ["--json"]:
        assert len(json.loads(done.stdout)["bands"]) == 4


def test_report_keeps_its_exit_status_and_error_line(store):
    done = run_cli("report", "--grid", "nope", db=store)
    assert done.returncode == 2
    assert done.stderr.startswith("error: no grid named 'nope'")


def test_report_into_a_closed_pipe_ends_quietly(store):
    proc = subprocess.Popen([sys.executable, "-m", "fragility_tui.cli", "report", "--grid", "g",
                             "--json", "--db", str(store)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(20).startswith(b"{")
    proc.stdout.close()  # what `| head -c 20` does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert b"Traceback" not in err and b"Exception ignored" not in err


def _in_child(code: str, **env) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, env={**child_env, **env}, cwd=REPO)


REFAULTS = """
    import resource, numpy as np
    from fragility_tui.cli import reuse_freed_memory
    took = reuse_freed_memory()
    def faults_of_an_array():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = np.ones(8 << 20)  # 64 MB: above glibc's largest default mmap threshold
        del a
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    first = faults_of_an_array()
    print(took, first, faults_of_an_array())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_arrays_are_reused_without_new_page_faults():
    took, first, second = _in_child(REFAULTS).stdout.split()
    assert took == "True"
    assert int(first) > 0 and int(second) * 10 < int(first)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_user_tuned_allocator_is_left_alone():
    took, first, second = _in_child(REFAULTS, MALLOC_TRIM_THRESHOLD_="131072").stdout.split()
    assert took == "False"
    assert int(second) * 10 > int(first)  # unmapped on free, faulted in again
