"""tests/cli_process.py starts the CLI warm (forked from a server that imported torch once): it
must behave as `python -m fragility_tui.cli` started cold, for what the tests look at."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

import cli_process
from cli_process import WarmProcess, cli_popen, cli_run


@pytest.fixture(params=["warm", "cold"])
def mode(request, monkeypatch):
    monkeypatch.setattr(cli_process, "COLD", request.param == "cold")
    return request.param


def test_output_status_and_errors_match_a_cold_process(mode, tmp_path):
    db = tmp_path / "s.duckdb"
    made = cli_run(["simulate", "--models", "2", "--items", "10", "--grid", "g", "--db", str(db)],
                   capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    listed = cli_run(["grids", "--json", "--db", str(db)], capture_output=True, text=True)
    assert listed.returncode == 0 and '"name": "g"' in listed.stdout
    bad = cli_run(["report", "--grid", "nope", "--db", str(db)], capture_output=True)
    assert bad.returncode == 2 and bad.stdout == b""
    assert bad.stderr.startswith(b"error: ") and bad.stderr.count(b"\n") == 1
    with pytest.raises(subprocess.CalledProcessError):
        cli_run(["report", "--grid", "nope", "--db", str(db)], capture_output=True, check=True)


def test_environment_directory_and_session_are_the_calls(mode, tmp_path):
    """`--db` relative to the call's directory; FRAGILITY_TUI_DB from the call's environment;
    a new session when asked."""
    (tmp_path / "here").mkdir()
    env = {**os.environ, "FRAGILITY_TUI_DB": str(tmp_path / "from-env.duckdb")}
    done = cli_run(["simulate", "--models", "2", "--items", "5", "--grid", "g"],
                   capture_output=True, text=True, env=env, cwd=tmp_path / "here")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "from-env.duckdb").exists()
    done = cli_run(["simulate", "--models", "2", "--items", "5", "--grid", "g", "--db",
                    "rel.duckdb"], capture_output=True, text=True, cwd=tmp_path / "here")
    assert done.returncode == 0 and (tmp_path / "here" / "rel.duckdb").exists()
    proc = cli_popen(["report", "--help"], stdout=subprocess.DEVNULL, start_new_session=True)
    assert proc.wait(timeout=60) == 0


def test_a_killed_child_reports_the_signal_and_a_timeout_raises(mode, tmp_path):
    proc = cli_popen(["runs", "list", "--db", str(tmp_path / "s.duckdb")],
                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    proc.kill()
    assert proc.wait(timeout=60) in (-signal.SIGKILL, 0)  # 0: it finished before the kill
    slow = cli_popen(["simulate", "--models", "20", "--items", "20000", "--grid", "g", "--db",
                      str(tmp_path / "t.duckdb")], stdout=subprocess.DEVNULL)  # seconds
    with pytest.raises(subprocess.TimeoutExpired):
        slow.wait(timeout=0.05)
    assert slow.poll() is None
    slow.send_signal(signal.SIGKILL)
    assert slow.wait(timeout=60) == -signal.SIGKILL


def test_a_library_setting_read_at_import_goes_cold():
    """A variable torch, transformers or the hub read when they load cannot reach a child of a
    server that loaded them already: such a call starts a cold process."""
    if cli_process.COLD:
        pytest.skip("FRAGILITY_TESTS_COLD_CLI=1: every call is cold")
    warm = cli_popen(["--help"], stdout=subprocess.DEVNULL)
    cold = cli_popen(["--help"], stdout=subprocess.DEVNULL,
                     env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": "/nonexistent"})
    assert isinstance(warm, WarmProcess) and isinstance(cold, subprocess.Popen)
    assert warm.wait(timeout=60) == 0 and cold.wait(timeout=60) == 0


def test_a_server_started_before_this_process_changed_its_environment_is_replaced(
        monkeypatch):
    """An in-process run sets PYTORCH_CUDA_ALLOC_CONF in the test process for good: the calls
    after it are warm again, from a server started with it."""
    if cli_process.COLD:
        pytest.skip("FRAGILITY_TESTS_COLD_CLI=1: every call is cold")
    before = cli_process._server()
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF",  # a value no earlier run left behind
                       f"{os.environ.get('PYTORCH_CUDA_ALLOC_CONF')},max_split_size_mb:512")
    after = cli_popen(["--help"], stdout=subprocess.DEVNULL)
    assert isinstance(after, WarmProcess) and after.wait(timeout=60) == 0
    assert cli_process._server() is not before and before.proc.poll() is not None


@pytest.mark.parametrize("name", ["TORCHINDUCTOR_CACHE_DIR", "PYTHONBREAKPOINT"])
def test_a_setting_read_at_use_stays_warm(name, monkeypatch, tmp_path):
    """TORCHINDUCTOR_CACHE_DIR is read when torch first compiles, PYTHONBREAKPOINT at each
    breakpoint(), in the child, from the environment the child is given: setting them (torch
    and Ray do, in this process) keeps the server."""
    if cli_process.COLD:
        pytest.skip("FRAGILITY_TESTS_COLD_CLI=1: every call is cold")
    before = cli_process._server()
    monkeypatch.setenv(name, str(tmp_path / "value"))
    proc = cli_popen(["--help"], stdout=subprocess.DEVNULL)
    assert isinstance(proc, WarmProcess) and proc.wait(timeout=60) == 0
    assert cli_process._server() is before and before.proc.poll() is None


def test_the_warm_command_gives_the_clis_output_and_status(tmp_path):
    """warm_command's `fragility-tui` (for scripts that call the installed command): the CLI's
    stdout, stderr and exit status, warm or cold (a setting read at import differs, or the
    server has gone)."""
    command = str(cli_process.warm_command(tmp_path))
    db = str(tmp_path / "s.duckdb")
    made = subprocess.run([command, "simulate", "--models", "2", "--items", "5", "--grid", "g",
                           "--db", db], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    for env in (os.environ, {**os.environ, "HF_HOME": str(tmp_path / "hf")}):
        listed = subprocess.run([command, "grids", "--json", "--db", db], capture_output=True,
                                text=True, env=env, timeout=120)
        assert listed.returncode == 0 and '"name": "g"' in listed.stdout
        bad = subprocess.run([command, "report", "--grid", "nope", "--db", db],
                             capture_output=True, text=True, env=env, timeout=120)
        assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.startswith("error: ")
    known = json.loads((tmp_path / "server.json").read_text())  # a server gone since: cold
    (tmp_path / "server.json").write_text(json.dumps({**known, "path": str(tmp_path / "gone")}))
    listed = subprocess.run([command, "grids", "--json", "--db", db], capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0 and '"name": "g"' in listed.stdout
