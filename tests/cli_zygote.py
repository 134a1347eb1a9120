"""The forking server behind tests/cli_process.py: imports what the CLI's model commands
import (torch, transformers, the runner), then forks one child per request, which becomes
`python -m fragility_tui.cli ARGS` with the request's stdio, environment, directory and
session, and ends as the interpreter does up to its module teardown (run_cli). The server
runs no torch operation itself, so no thread pool exists when it forks.

Protocol, one Unix-socket connection per child: the client sends a JSON request with three
file descriptors (stdin, stdout, stderr) attached; the server answers the child's pid as one
line, then, when the child has ended, its exit status as another (negative: the signal).
It exits when its parent closes the pipe passed as argv[2]."""

from __future__ import annotations

import array
import gc
import io
import json
import os
import selectors
import signal
import socket
import sys


# What the CLI's model commands import (the rest it imports as it goes, as a cold process does):
# an optimisation only, so a module missing here is skipped, not an error.
PRELOAD = ("numpy", "duckdb", "torch", "transformers", "transformers.models.llama.modeling_llama",
           "fragility_tui.cli", *__import__("fragility_tui.cli").cli.COMMAND_MODULES,
           "runners.run.loop", "runners.run.batch_loop", "runners.models.prepare",
           "runners.models.load", "runners.backends.transformers.scoring")


def preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    try:  # transformers' top-level names load on first use
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401
    except ImportError:
        pass


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def serve(listener: socket.socket, parent_gone: int) -> tuple[dict, list[int]]:
    """Fork a child per request; the child returns its request and stdio, the server never
    returns (it exits when the parent's pipe closes)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through wake_w
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(parent_gone, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    while True:
        for key, _ in selector.select():
            if key.fileobj == parent_gone:
                sys.exit(0)
            if key.fileobj == wake_r:
                os.read(wake_r, 4096)
                reap(children)
                continue
            conn, _ = listener.accept()
            request, fds = receive(conn)
            pid = os.fork()
            if pid == 0:  # the child: drop the server's descriptors and handlers
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                selector.close()
                for fd in (wake_r, wake_w, parent_gone):
                    os.close(fd)
                listener.close()
                for other in children.values():
                    other.close()
                conn.close()
                return request, fds
            for fd in fds:
                os.close(fd)
            conn.sendall(f"{pid}\n".encode())
            children[pid] = conn
        reap(children)


def reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass  # the client stopped listening
            conn.close()


def become(request: dict, fds: list[int]) -> None:
    """Turn this forked child into `python -m fragility_tui.cli ARGS` as started by
    subprocess.Popen with the request's settings."""
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()  # in place: modules hold os.environ itself
    os.environ.update(request["env"])
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding = os.environ.get("PYTHONIOENCODING") or "utf-8"
    sys.stdin = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding=encoding)
    sys.stdout = _writer(1, encoding, "strict", unbuffered)
    sys.stderr = _writer(2, encoding, "backslashreplace", unbuffered, line_buffered=True)
    sys.path[0] = os.getcwd()  # what `python -m` puts first


def _writer(fd: int, encoding: str, errors: str, unbuffered: bool,
            line_buffered: bool = False) -> io.TextIOWrapper:
    raw = io.open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors,
                            line_buffering=line_buffered or os.isatty(fd),
                            write_through=unbuffered)


def main() -> None:
    path, parent_gone = sys.argv[1], int(sys.argv[2])
    preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    gc.freeze()  # the children's collections skip (and so do not copy) what is loaded here
    request, fds = serve(listener, parent_gone)
    become(request, fds)
    os._exit(run_cli(request["args"]))


def run_cli(args: list[str]) -> int:
    """`python -m fragility_tui.cli ARGS` up to the end of the interpreter's shutdown that
    has effects: non-daemon threads joined, atexit work (weakref.finalize included), the
    streams flushed. Not the teardown of every module and object after it, which in a child
    holding torch took 0.9 s (0.25 s with the server's objects frozen) against 0.01 s."""
    import atexit
    import runpy
    import threading

    sys.modules.pop("fragility_tui.cli", None)  # `python -m` runs it as __main__ only
    sys.argv = ["-m", *args]
    code = 0
    try:
        runpy.run_module("fragility_tui.cli", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports it
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code == -signal.SIGINT:  # as the interpreter ends on an uncaught KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()
