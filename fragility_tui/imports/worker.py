"""A big log parsed in a second process while this one matches and writes.

Parsing a million JSON lines is half an import's time and the other half (matching, cells,
DuckDB) does not need it done first, so on two or more cores a big file's chunks are read
by a child process and handed over through a pipe and a bounded queue (two chunks in
flight: memory stays a few chunks whatever the file's size). Chunks travel as columns: a
slotted sample per line pickles three times slower than its fields as lists. An error in
the reader (a bad line, named by file and line) is raised here, as the same error."""

from __future__ import annotations

import json
import os
import queue as queues
import sys
from dataclasses import replace
from pathlib import Path

from fragility_tui.imports.records import LogRun, LogSample

PARALLEL_MIN_BYTES = 32 * 2**20  # below this a second process costs more than it saves
IN_FLIGHT = 2  # chunks parsed ahead of the consumer


def worth_a_process(path: Path) -> bool:
    """A file big enough, and a second core to read it on."""
    try:
        big = path.stat().st_size >= PARALLEL_MIN_BYTES
    except OSError:
        return False
    return big and (os.cpu_count() or 1) >= 2


def read_chunks_in_process(module_name: str, path: Path, **kwargs):
    """`module.read_chunks(path, **kwargs)`, run in a child process (`python -m` this
    module: nothing of the caller's is re-imported there), chunk by chunk. Closing the
    generator (an error downstream, Ctrl-C) stops the child."""
    import subprocess
    import tempfile
    import threading

    import fragility_tui

    env = dict(os.environ)
    root = str(Path(fragility_tui.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", __name__, module_name, str(path), json.dumps(kwargs)],
        stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, env=env)
    handoff: queues.Queue = queues.Queue(maxsize=IN_FLIGHT)
    pump = threading.Thread(target=_pump, args=(proc.stdout, handoff), daemon=True)
    pump.start()
    try:
        while True:
            kind, payload = _next(handoff, proc, path, stderr)
            if kind == "chunk":
                yield unpack(payload)
            elif kind == "error":
                raise payload
            else:
                return
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        while pump.is_alive():  # a pump blocked on a full queue lets go
            try:
                handoff.get(timeout=0.1)
            except queues.Empty:
                pass
        proc.stdout.close()
        stderr.close()


def _pump(stream, handoff) -> None:
    """Messages off the child's stdout (a read releases the GIL); None at its end."""
    import pickle

    try:
        while header := stream.read(8):
            if len(header) < 8:
                break
            handoff.put(pickle.loads(stream.read(int.from_bytes(header, "little"))))
    except Exception:  # noqa: BLE001 - a torn stream is reported by _next
        pass
    handoff.put(None)


def _next(handoff, proc, path, stderr):
    message = handoff.get()
    if message is not None:
        return message
    proc.wait()
    stderr.seek(0)
    tail = stderr.read()[-2000:].decode("utf-8", "replace").strip()
    raise RuntimeError(f"the process reading {path} ended without a result (exit code "
                       f"{proc.returncode})" + (f": {tail}" if tail else ""))


def _produce(module_name: str, path: str, kwargs: dict, out) -> None:
    """The child: every chunk, then ("done", None); an error is handed over."""
    import gc
    import pickle
    from importlib import import_module

    def send(message) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(len(data).to_bytes(8, "little"))
        out.write(data)
        out.flush()

    gc.disable()  # as in the parent (pipeline.collector_paused): no cycles, many objects
    try:
        for runs in import_module(module_name).read_chunks(Path(path), **kwargs):
            send(("chunk", pack(runs)))
        send(("done", None))
    except Exception as exc:  # noqa: BLE001 - handed to the parent, raised there
        send(("error", _picklable(exc)))


def _picklable(exc: Exception) -> Exception:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - an exception that cannot cross keeps its text
        return RuntimeError(f"{type(exc).__name__}: {exc}")


FIELDS = LogSample.__slots__


def pack(runs: list[LogRun]):
    """Runs as (header without samples, index of its samples list) and each distinct
    samples list as columns (runs of one log line share theirs)."""
    lists: dict[int, int] = {}
    columns = []
    headers = []
    for run in runs:
        key = id(run.samples)
        if key not in lists:
            lists[key] = len(columns)
            columns.append([[getattr(s, f) for s in run.samples] for f in FIELDS])
        headers.append((replace(run, samples=[]), lists[key]))
    return headers, columns


def unpack(payload) -> list[LogRun]:
    headers, columns = payload
    lists = [[LogSample(*row) for row in zip(*cols)] for cols in columns]
    out = []
    for header, k in headers:
        header.samples = lists[k]
        out.append(header)
    return out


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _produce(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.stdout.buffer)
