"""`run --ray ADDRESS` on a two-node Ray cluster started on this machine: a head and a second
node, one CPU each, each with its own data and cache folders (XDG_* variables, a Ray temp
folder each) and no folder shared between them or with the driver. The parts come back
through Ray's object store; the grid equals a single-process run; a part lost on the way
fails the launch; a relative --items path works; a task shape no node holds is refused
within a minute, with the numbers.

The nodes are `ray start --block` processes in their own sessions, stopped by their process
group (only the processes this module started), even when a test fails."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from fragility_tui.store.store import Store  # noqa: E402
from test_ray_launch import CONFIGS, RAY_ENV, common_args  # noqa: E402
from test_run_loop import REPO, assert_same_cells, cells_of  # noqa: E402

# The machine's own address: a driver given 127.0.0.1 still looks the cluster up by this one.
IP = ray.util.get_node_ip_address()
pytestmark = pytest.mark.slow  # a cluster start and worker imports: minutes on 2 cores


_GIVEN_PORTS: set[int] = set()


def _port() -> int:
    """A free port not handed out before in this module: the kernel may give a just-closed
    port again, and Ray refuses two components on one port."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port


def _own_folders(root: Path) -> dict:
    """Environment giving a process its own data and cache folders."""
    for sub in ("data", "cache", "hf"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {"XDG_DATA_HOME": str(root / "data"), "XDG_CACHE_HOME": str(root / "cache"),
            "HF_HOME": str(root / "hf")}


def _start_node(root: Path, ray_tmp: Path, args: list[str]) -> subprocess.Popen:
    ports = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
             "--dashboard-agent-grpc-port", "--metrics-export-port",
             "--runtime-env-agent-port"]
    argv = [str(Path(sys.executable).with_name("ray")), "start", "--block", "--num-cpus=1",
            "--num-gpus=0", "--disable-usage-stats",
            f"--node-ip-address={IP}", f"--temp-dir={ray_tmp}",
            f"--object-store-memory={200 * 2**20}", *[f"{p}={_port()}" for p in ports], *args]
    # No drain on SIGTERM (Ray >= 2.5x drains for up to 30 s, asking a GCS the same stop
    # has already ended: the module's teardown took 33 s); these nodes serve nothing.
    env = {**os.environ, **RAY_ENV, **_own_folders(root),
           "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    with open(root / "node.log", "w") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**env,
                                "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))})


def _signal_group(proc: subprocess.Popen, sig) -> bool:
    try:
        os.killpg(proc.pid, sig)
        return True
    except ProcessLookupError:
        return False


def _stop(procs: list[subprocess.Popen]) -> None:
    """The nodes' whole process groups (ray start, its raylet, GCS and workers), all asked
    at once; what has not left after 30 s is killed."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        signalled = [p for p in procs if _signal_group(p, sig)]
        deadline = time.monotonic() + wait
        for proc in signalled:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        if all(p.poll() is not None for p in procs):
            time.sleep(1)  # raylet children leave after the parent
            break
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)  # anything left in the group


def _alive_nodes(address: str, env: dict) -> int:
    code = ("import ray; ray.init(address=%r, log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))" % address)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60)
    return int(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else 0


def _wait_started(node: subprocess.Popen, root: Path, timeout=180) -> None:
    """Until `ray start` says its node runs (the head's GCS listens; another node's raylet
    has joined it)."""
    deadline = time.monotonic() + timeout
    while "Ray runtime started" not in (root / "node.log").read_text():
        assert node.poll() is None, (root / "node.log").read_text()[-3000:]
        assert time.monotonic() < deadline, f"ray start never started: {root / 'node.log'}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    # Ray's socket paths must stay under 108 characters: a short folder of its own per node.
    ray_tmp = Path(tempfile.mkdtemp(prefix="rn-", dir="/tmp"))
    port, nodes = _port(), []
    address = f"{IP}:{port}"
    driver_env = {**os.environ, **RAY_ENV, **_own_folders(root / "driver")}
    try:
        nodes.append(_start_node(root / "head", ray_tmp / "h", ["--head", f"--port={port}",
                                                              "--include-dashboard=false"]))
        _wait_started(nodes[0], root / "head")  # before a node joins it
        nodes.append(_start_node(root / "second", ray_tmp / "s", [f"--address={address}"]))
        _wait_started(nodes[1], root / "second")  # then the count below, normally at once
        deadline = time.monotonic() + 180
        while True:
            for node, name in zip(nodes, ("head", "second")):
                assert node.poll() is None, (root / name / "node.log").read_text()[-3000:]
            if _alive_nodes(address, driver_env) >= 2:
                break
            assert time.monotonic() < deadline, "the two-node cluster did not come up"
            time.sleep(2)
        yield address, driver_env, root
    finally:
        _stop(nodes)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _launch(args, cwd, env, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fragility_tui.cli", "run", *args],
                          cwd=cwd, env={**env, "NO_COLOR": "1"}, capture_output=True,
                          text=True, timeout=timeout)


def test_two_nodes_relative_items_give_the_single_process_grid(cluster, tiny_folder, whole,
                                                                tmp_path):
    address, env, root = cluster
    items, reference = whole
    (tmp_path / "items.jsonl").write_bytes(Path(items).read_bytes())
    args = common_args(tiny_folder, "items.jsonl")  # relative to the driver's folder
    db = tmp_path / "s.duckdb"
    proc = _launch([*args, "--ray", address, "--shards", "2", "--db", str(db)], tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store = Store(db)
    assert_same_cells(cells_of(store, "g"), reference)
    runs = store.runs("g")
    launch = [r for r in runs if r.spec.get("launcher")][0]
    assert launch.status == "finished" and launch.cells_done == 24
    assert launch.provenance["transfer"] == "ray object store"
    assert launch.spec["items"] == [str(tmp_path / "items.jsonl")]
    workers = [r for r in runs if not r.spec.get("launcher")]
    assert sorted(r.spec["shard"][0] for r in workers) == [0, 1]
    # Nothing went through a shared folder: the parts were the driver's own (in its data
    # folder, removed once merged: issue 47), and neither node's scratch kept any.
    assert not list((root / "driver" / "data").rglob("cells/*.parquet"))
    for node in ("head", "second"):
        assert not list((root / node / "cache").rglob("*.parquet"))


def test_a_part_lost_on_the_way_fails_the_launch(cluster, tiny_folder, whole, tmp_path,
                                                  monkeypatch):
    """The driver in this process, so the loss can be made on the driver's side: one cells
    part of the first task to come back is dropped before it is written."""
    from fragility_tui.store.runs import RunStatus
    from runners.cluster import launcher as ray_launcher
    from runners.run.failure import RunFailed
    from runners.run.loop import RunSpec

    address, env, _ = cluster
    items, _ = whole
    for key in ("XDG_DATA_HOME", "XDG_CACHE_HOME", *RAY_ENV):
        monkeypatch.setenv(key, env[key])
    real_unpack = ray_launcher.unpack

    def lossy(files, folder):
        cells = sorted(k for k in files if k.startswith("cells/"))
        real_unpack({k: v for k, v in files.items() if k != cells[0]}, folder)

    monkeypatch.setattr(ray_launcher, "unpack", lossy)
    spec = RunSpec(models=[str(tiny_folder)], items=[str(items)], grid="g", per_benchmark=None,
                   configs=CONFIGS.split(","), threads=1, prompt_mode="chat", batch_size=1)
    store = Store(tmp_path / "s.duckdb")
    launch = ray_launcher.Launch(spec, store, address=address, shards=2, folder=None,
                                 gpus_per_task=None, display="none")
    try:
        with pytest.raises(RunFailed, match=r"wrote \d+ cells but the store holds \d+"):
            launch.execute()
    finally:
        ray.shutdown()
    run = store.get_run(launch.run_id)
    assert run.status == RunStatus.FAILED and "lost between the worker and the driver" in \
        run.error
    events = [json.loads(line) for line in open(run.events_path)]
    assert events[-1]["event"] == "failed"


def test_a_task_no_node_can_hold_is_refused_within_a_minute(cluster, tiny_folder, whole,
                                                             tmp_path):
    address, env, _ = cluster
    items, _ = whole
    args = common_args(tiny_folder, items)
    args[args.index("--threads") + 1] = "2"  # nodes have 1 CPU each
    db = tmp_path / "s.duckdb"
    t0 = time.monotonic()
    proc = _launch([*args, "--ray", address, "--db", str(db)], tmp_path, env, timeout=120)
    assert time.monotonic() - t0 < 60
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "each asks for 2 CPU, 0 GPU" in proc.stderr
    assert proc.stderr.count(": 1 CPU, 0 GPU") == 2  # both nodes, with what they have
    assert not Store(db).runs()  # refused before anything was recorded
