"""`python -m fragility_tui.cli ARGS` for the tests, started warm.

The suite starts the CLI as a process ~450 times. A model command's process spent ~2 of its
~3 CPU-seconds importing torch and transformers, and every one imported numpy and DuckDB.
Here each test process keeps one server (tests/cli_zygote.py) that imported them once and
forks a child per command (the suite's CPU: ~980 -> ~850 s on 2 cores, 2026-12-06). The
child is a process of its own like any other: its own pid (kill -9 reaches it), session,
stdio, environment and working directory, its exit status or signal. It runs
`fragility_tui.cli` as `__main__`, as `python -m` does, and ends as the interpreter does up
to its module teardown (threads joined, atexit work, streams flushed).

What a fork cannot give, a cold `subprocess.Popen` does, chosen per call: an environment that
differs from the server's in a variable read when torch, transformers, Hugging Face's hub or
a BLAS library load (HF_*, TRANSFORMERS_*, TORCH_*, OMP_*, ...), and every call when
FRAGILITY_TESTS_COLD_CLI=1 (the whole suite cold). The entry point itself is tested by the
tests that start `python -m fragility_tui.cli` directly: under a pty
(tests/commands/test_report_uncut.py, tests/tui/test_hangup.py), into a closed pipe
(tests/commands/test_one_shot.py), with `-X importtime` (tests/test_layering.py)."""

from __future__ import annotations

import array
import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLD = os.environ.get("FRAGILITY_TESTS_COLD_CLI") == "1"
# Read when those libraries load: a child forked from a server started with other values would
# not see the call's.
LOAD_TIME_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH", "PYTORCH_", "OMP_", "MKL_",
                      "OPENBLAS_", "KMP_", "CUDA_", "PYTHON", "LD_", "MALLOC_", "GLIBC_",
                      "TOKENIZERS_", "SAFETENSORS_")
# ... except these, read at use (in the child, from the environment it is given): torch sets
# TORCHINDUCTOR_CACHE_DIR in this process when it first compiles and Ray PYTHONBREAKPOINT when
# it starts, which restarted the server (~4 CPU-s) for nothing.
READ_AT_USE = frozenset({"TORCHINDUCTOR_CACHE_DIR", "PYTHONBREAKPOINT"})


def cli_popen(args, *, stdin=None, stdout=None, stderr=None, text=False, env=None,
              cwd=None, start_new_session=False, encoding=None, errors=None):
    """subprocess.Popen([sys.executable, "-m", "fragility_tui.cli", *args], ...), warm where
    it can be (see the module's docstring)."""
    env = dict(os.environ if env is None else env)
    cwd = str(cwd or REPO)
    if COLD or not (server := _server()).matches(env):
        return subprocess.Popen([sys.executable, "-m", "fragility_tui.cli", *map(str, args)],
                                stdin=stdin, stdout=stdout, stderr=stderr, text=text, env=env,
                                cwd=cwd, start_new_session=start_new_session,
                                encoding=encoding, errors=errors)
    return WarmProcess(server, [str(a) for a in args], stdin, stdout, stderr,
                       text or encoding is not None or errors is not None, env, cwd,
                       start_new_session, encoding, errors)


def cli_run(args, *, input=None, capture_output=False, timeout=None, check=False,
            **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run for the CLI, warm where it can be."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    proc = cli_popen(args, **kwargs)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    argv = ["fragility-tui", *map(str, args)]
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, argv, out, err)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def launch_detached(argv, log_path):
    """fragility_tui.processes.launch_detached, warm where it can be: the same session, stdio
    and environment (processes.detached_stdio). The app's launches (the Runs pane's form, the
    Compare form's runs and comparison) go through it in the pilot tests (tests/tui/conftest.py);
    the real one is tested by tests/runners/test_launch_events.py."""
    from fragility_tui.processes import detached_stdio, open_log

    with open_log(log_path) as log:
        return cli_popen(argv, **detached_stdio(log))


def matches_server(server, env: dict) -> bool:
    """Whether a child of `server` sees what a cold process with `env` would."""
    keys = {k for k in (*env, *server.env)
            if k.startswith(LOAD_TIME_PREFIXES) and k not in READ_AT_USE}
    return all(env.get(k) == server.env.get(k) for k in keys)


def warm_command(folder: Path) -> Path:
    """A `fragility-tui` command written into `folder` (put it first on PATH) for the scripts
    that call the installed command (examples/slurm): each call is a child of this process's
    warm server when its environment allows, as cli_popen's are, else `python -m
    fragility_tui.cli`. Its exit status is the CLI's (128 + N when killed by signal N)."""
    server = _server()
    (folder / "server.json").write_text(json.dumps({"path": server.path, "env": server.env}))
    command = folder / "fragility-tui"
    command.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} "
                       f"{folder / 'server.json'} \"$@\"\n")
    command.chmod(0o755)
    return command


class _Server:
    """One forking server per test process, started at the first warm call."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="fragility-cli-")
        self.path = os.path.join(self.folder, "s")
        self.env = dict(os.environ)
        alive_r, self._alive_w = os.pipe()  # the server exits when this process does
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "cli_zygote.py"), self.path, str(alive_r)],
            pass_fds=(alive_r,), stdout=subprocess.PIPE, cwd=REPO, env=self.env, text=True)
        os.close(alive_r)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the warm CLI server did not start: {line!r}")
        atexit.register(self.close)

    matches = matches_server

    def connect(self) -> socket.socket:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        return conn

    def close(self) -> None:
        if self._alive_w < 0:
            return
        os.close(self._alive_w)
        self._alive_w = -1
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


_SERVER: _Server | None = None
_LOCK = threading.Lock()


def _server() -> _Server:
    """The server, started anew when this process's own environment has changed what the
    libraries read at import (an in-process run sets PYTORCH_CUDA_ALLOC_CONF for good)."""
    global _SERVER
    with _LOCK:
        if _SERVER is not None and not _SERVER.matches(os.environ):
            _SERVER.close()
            _SERVER = None
        if _SERVER is None or _SERVER.proc.poll() is not None:
            _SERVER = _Server()
        return _SERVER


class WarmProcess:
    """The part of subprocess.Popen's interface the tests use, for a forked child."""

    def __init__(self, server, args, stdin, stdout, stderr, text, env, cwd, new_session,
                 encoding, errors):
        self.args = ["fragility-tui", *args]
        self.returncode = None
        opened: list[int] = []  # our ends of pipes and /dev/null, closed once passed
        self.stdin, fd_in = self._end(stdin, 0, "w", text, encoding, errors, opened)
        self.stdout, fd_out = self._end(stdout, 1, "r", text, encoding, errors, opened)
        if stderr == subprocess.STDOUT:
            self.stderr, fd_err = None, fd_out
        else:
            self.stderr, fd_err = self._end(stderr, 2, "r", text, encoding, errors, opened)
        self._conn = server.connect()
        request = {"args": args, "env": env, "cwd": cwd, "new_session": new_session}
        fds = array.array("i", [fd_in, fd_out, fd_err])
        self._conn.sendmsg([json.dumps(request).encode()],
                           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
        for fd in opened:
            os.close(fd)
        self._received = b""
        self.pid = int(self._line(None))

    @staticmethod
    def _end(spec, own_fd, mode, text, encoding, errors, opened):
        """(our file object or None, the descriptor to give the child)."""
        if spec is None:
            return None, own_fd
        if spec == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR)
            opened.append(fd)
            return None, fd
        if spec == subprocess.PIPE:
            r, w = os.pipe()
            ours, theirs = (w, r) if mode == "w" else (r, w)
            opened.append(theirs)
            if text:
                return os.fdopen(ours, mode, encoding=encoding or "utf-8",
                                 errors=errors or "strict",
                                 **({"buffering": 1} if mode == "w" else {})), theirs
            return os.fdopen(ours, mode + "b", buffering=0 if mode == "w" else -1), theirs
        fileno = spec if isinstance(spec, int) else spec.fileno()
        return None, fileno

    def _line(self, timeout) -> str | None:
        """The server's next line; None when none came within `timeout` (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._received:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._conn], [], [], remaining)
            if not ready:
                return None
            chunk = self._conn.recv(64)
            if not chunk:
                raise RuntimeError(f"the warm CLI server went away while running {self.args}")
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return line.decode()

    def poll(self):
        return self.wait(0, polling=True)

    def wait(self, timeout=None, *, polling=False):
        if self.returncode is None:
            line = self._line(timeout)
            if line is None:
                if polling:
                    return None
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = int(line)
            self._conn.close()
        return self.returncode

    def communicate(self, input=None, timeout=None):
        results: dict[str, object] = {}
        threads = []
        for name in ("stdout", "stderr"):
            stream = getattr(self, name)
            if stream is not None:
                thread = threading.Thread(target=lambda n=name, s=stream: results.update(
                    {n: s.read()}), daemon=True)
                thread.start()
                threads.append(thread)
        if self.stdin is not None:
            try:
                if input:
                    self.stdin.write(input)
                self.stdin.close()
            except BrokenPipeError:
                pass
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for name in ("stdout", "stderr"):
            stream = getattr(self, name)
            if stream is not None:
                stream.close()
        return results.get("stdout"), results.get("stderr")

    def send_signal(self, sig) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


class _Known:
    """A server of another process, known by its socket and environment (warm_command)."""

    def __init__(self, path: str, env: dict):
        self.path, self.env = path, env

    matches = matches_server

    def connect(self) -> socket.socket:
        return _Server.connect(self)


def _command(server_file: str, args: list[str]) -> int:
    """The command warm_command writes: `fragility-tui ARGS` with this process's stdio,
    environment and directory."""
    server = _Known(**json.loads(Path(server_file).read_text()))
    env = dict(os.environ)
    cold = [sys.executable, "-m", "fragility_tui.cli", *args]
    if COLD or not server.matches(env):
        os.execv(sys.executable, cold)
    try:
        proc = WarmProcess(server, args, None, None, None, False, env, os.getcwd(), False,
                           None, None)
    except OSError:  # the server has gone (its test process ended or replaced it)
        os.execv(sys.executable, cold)
    code = proc.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(_command(sys.argv[1], sys.argv[2:]))
