"""`fragility-tui run ... --ray [ADDRESS] --shards N`: one Ray task per (model, shard).

Before anything is recorded, the driver (this module) resolves the item files and model
folders to absolute paths, refuses a task shape no node of the cluster can hold (naming the
resources asked and each node's), and runs a probe on every node that can hold one
(runners/cluster/tasks.py): the paths must be there, and each model's fingerprint is computed by
the workers on their own device (a CPU-only head may launch `--device cuda`) and must agree
across nodes and with the store.

Each task runs the ordinary run loop into Parquet parts (store/parts.py) with the GPUs it
asks Ray for. Without `--out-parts` the parts are written on the worker's own node and come
back in the task's return value, through Ray's object store: no folder is shared between
nodes. With `--out-parts DIR` they go to DIR, which every node must see at the same path
(checked by the probes). Ray retries a task whose worker process dies, and the retry skips
the cells its predecessor's parts hold. The driver merges as tasks finish (store/merge.py:
idempotent), checks that the store holds every cell each task says it wrote and, at the
end, every cell of the launch: a lost part fails the launch. It records itself as a run
with a JSON-lines events file, so the Runs pane shows its progress like any other run's.
Without an ADDRESS it starts a local cluster on this machine.

Every node must have fragility-tui (with the `runner` and `cluster` extras) installed.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from fragility_tui import settings
from fragility_tui.errors import InputError
from fragility_tui.processes import process_start
from fragility_tui.store.models import fingerprint_diff
from fragility_tui.store.runs import RunStatus, new_run_id
from fragility_tui.store.schema import utc_now
from runners.run.events import Display, EventLog, default_events_path
from runners.run.admission import check_grid, load_run_items
from runners.run.failure import RunFailed
from runners.run.loop import RunSpec
from runners.cluster.tasks import LAUNCH_MARKER, evaluate_shard, probe_node, unpack

INSTALL_HINT = "pip install -e '.[cluster]' (or pip install 'fragility-tui[cluster]')"
TASK_RETRIES = 3  # a task whose worker dies is started again up to this many times
POLL_S = 1.0  # progress refresh (a display line or event at most once a second)


def require_ray():
    try:
        import ray
    except ImportError:
        raise InputError(f"--ray needs Ray, an optional extra: {INSTALL_HINT}",
                         field="--ray") from None
    return ray


def task_specs(spec: RunSpec, shards: int) -> list[RunSpec]:
    """One spec per (model, shard), in submission order (model-major)."""
    return [replace(spec, models=[model], shard=[i, shards])
            for model in spec.models for i in range(shards)]


def absolute_paths(spec: RunSpec) -> RunSpec:
    """Item files and model folders as absolute paths: a worker's working folder is not the
    driver's, so a relative path would name another file there, or none. Model specs that
    are not paths here (hub names, aliases) are left as typed."""
    items = [str(Path(p).expanduser().resolve()) for p in spec.items]
    models = [str(Path(m).expanduser().resolve()) if Path(m).expanduser().exists() else m
              for m in spec.models]
    return replace(spec, items=items, models=models)


def feasible_nodes(demand: dict[str, float], nodes: list[dict]) -> list[dict]:
    """The alive nodes whose total resources hold one task; none: an InputError naming the
    resources asked and those of every node (a task Ray cannot place waits forever)."""
    alive = [n for n in nodes if n.get("Alive")]
    fits = [n for n in alive if all(n.get("Resources", {}).get(k, 0) >= v
                                    for k, v in demand.items() if v)]
    if fits:
        return fits

    def shape(resources: dict) -> str:
        return ", ".join(f"{_number(resources.get(k, 0))} {k}" for k in demand)

    listing = "; ".join(f"{n.get('NodeManagerAddress', '?')} ({str(n.get('NodeID', ''))[:8]}): "
                        f"{shape(n.get('Resources', {}))}" for n in alive) or "no node alive"
    raise InputError(f"no node of the cluster can run a task: each asks for {shape(demand)} "
                     f"(--threads, --gpus-per-task); the nodes have {listing}",
                     field="--threads" if demand.get("GPU", 0) == 0 else "--gpus-per-task")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class Launch:
    """The driver: checks the cluster, submits the tasks, merges and checks what comes
    back, reports progress, records one run row."""

    def __init__(self, spec: RunSpec, store, *, address: str | None, shards: int,
                 folder: str | None, gpus_per_task: float | None, display: str = "plain"):
        if shards < 1:
            raise InputError("--shards must be at least 1", field="--shards")
        if spec.shard:
            raise InputError("--ray makes the shards itself (--shards N); drop --shard",
                             field="--shard")
        if gpus_per_task is not None and (gpus_per_task < 0 or gpus_per_task > 1
                                          and not float(gpus_per_task).is_integer()):
            raise InputError("--gpus-per-task is a share of one GPU (0 < G < 1) or a whole "
                             f"number of GPUs, not {gpus_per_task}", field="--gpus-per-task")
        self.ray = require_ray()
        self.spec = absolute_paths(spec)
        for path in self.spec.items:  # the driver reads them too (cells_total, the check)
            if not Path(path).is_file():
                raise InputError("no such item file", path=path, field="--items")
        # Refused before starting: items that do not load, a grid that cannot take the cells.
        check_grid(store, self.spec, load_run_items(self.spec).set_hash)
        self.store, self.address, self.shards = store, address, shards
        self.shared = folder is not None  # parts in a folder every node sees
        self.planned_id = new_run_id()  # the launch's run id, known before its row
        self.folder = Path(folder).expanduser().resolve() if folder else _default_folder(
            store, self.planned_id)
        self.gpus_per_task = gpus_per_task
        self.display = Display(display)
        self.run_id: str | None = None
        self.names: list[str] = []
        self.wanted: set[tuple[str, str]] = set()  # (item, config) of the launch, per model
        self.events: EventLog | None = None
        self.counted: dict[str, int] = {}  # part file -> cells (parts never change)
        self.cells_total = 0
        self.started = time.monotonic()
        self._owns_ray = False

    # -- plumbing -------------------------------------------------------------------------

    def emit(self, event: str, **fields) -> None:
        self.display.show(self.events.emit(event, **fields))

    def cells_in_parts(self) -> int:
        import pyarrow.parquet as pq

        from fragility_tui.store.parts import CELLS, visible_files

        for part in visible_files(self.folder / CELLS, "*.parquet"):
            if str(part) not in self.counted:
                self.counted[str(part)] = pq.read_metadata(part).num_rows
        return sum(self.counted.values())

    def tokens_in_runs(self) -> int:
        """Tokens the workers forwarded (each attempt counts its own work)."""
        from fragility_tui.store.parts import PartsStore

        return sum(int(r.tokens or 0) for r in PartsStore(self.folder).runs(self.spec.grid))

    def merge(self) -> dict | None:
        from fragility_tui.store.merge import merge_parts

        if not any((self.folder / "runs").glob("*.json")):
            return None
        return merge_parts(self.store, [self.folder], self.spec.grid)

    # -- the launch -------------------------------------------------------------------------

    def execute(self) -> str:
        try:
            self._init_cluster()
            demand = {"CPU": float(self.spec.threads), "GPU": float(self._gpus_per_task())}
            self._admit(demand)  # refusals here record nothing
            self._record(demand)
        except BaseException:
            self._shutdown()
            raise
        try:
            status, error = self._execute(demand), None
        except KeyboardInterrupt:
            status, error = RunStatus.CANCELLED, "interrupted"
        except Exception as exc:
            status, error = RunStatus.FAILED, str(exc)
        finally:
            self._shutdown()
        done, error = self._final_merge(error)
        status = RunStatus.FAILED if error and status == RunStatus.FINISHED else status
        if error is None and status == RunStatus.FINISHED:
            error = self._missing_cells()  # every cell of the launch, or a failed launch
            status = RunStatus.FAILED if error else status
        tokens, seconds = self.tokens_in_runs(), time.monotonic() - self.started
        self.store.update_run(self.run_id, status=status, ended_at=utc_now(), error=error,
                              cells_done=done, tokens=tokens, seconds=seconds)
        self.emit(status if status != RunStatus.FAILED else "failed",
                  **({"reason": error} if error else {}), cells_done=done,
                  cells_total=self.cells_total, tokens=tokens, seconds=seconds)
        self.events.close()
        if status == RunStatus.FAILED:
            raise RunFailed(error)
        if status == RunStatus.FINISHED:
            self.clean_up()
        return status

    def clean_up(self) -> None:
        """After a launch whose every cell is in the store: its own parts folder goes (an
        --out-parts folder is the user's, and stays)."""
        import shutil

        if not self.shared:
            shutil.rmtree(self.folder, ignore_errors=True)
            try:  # the store's folder too, once no other launch of it has parts there
                self.folder.parent.rmdir()
            except OSError:
                pass

    def _final_merge(self, error: str | None) -> tuple[int, str | None]:
        """Whatever the workers committed is kept; a merge that fails after a task failed
        must not hide the task's own reason (and one that fails alone is the reason)."""
        try:
            merged = self.merge()
        except InputError as exc:
            return 0, error or f"merging {self.folder}: {exc}"
        return (self._cells_of_launch() if merged else 0), error

    def _admit(self, demand: dict) -> None:
        """Refuse, before a run row or a task exists: a task shape no node holds, paths or
        an --out-parts folder a node does not see, fingerprints that differ between nodes
        or from the store's."""
        from fragility_tui.items.loaders import load_many

        ray = self.ray
        nodes = feasible_nodes(demand, ray.nodes())
        items, _ = load_many(self.spec.items, per_benchmark=self.spec.per_benchmark,
                             seed=self.spec.seed)
        self.wanted = {(it.item_uid, c) for it in items for c in self.spec.configs}
        marker = None
        if self.shared:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._marker = self.folder / LAUNCH_MARKER.format(f"probe-{os.getpid()}")
            self._marker.write_text("")
            marker = str(self._marker)
        paths = self.spec.items + [m for m in self.spec.models if os.path.isabs(m)]
        probe = ray.remote(probe_node)
        try:
            found = ray.get([probe.options(
                num_cpus=demand["CPU"], num_gpus=demand["GPU"],
                scheduling_strategy=_on_node(n["NodeID"])).remote(
                    self.spec.to_dict(), paths, marker) for n in nodes])
        finally:
            if marker:
                self._marker.unlink(missing_ok=True)
        fingerprints: dict[str, tuple[str, dict]] = {}
        for node in found:
            if node["missing"]:
                raise InputError(f"node {node['node']} does not see "
                                 f"{', '.join(node['missing'])}: every node needs the item "
                                 "files and model folders at the same paths", field="--items")
            if node.get("error"):
                raise InputError(f"on node {node['node']}: {node['error']}")
            for name, fp in node["models"].items():
                first = fingerprints.setdefault(name, (node["node"], fp))
                differences = fingerprint_diff(first[1], fp)
                if differences:
                    raise InputError(f"model {name!r} would be evaluated with other settings "
                                     f"on node {node['node']} than on {first[0]} "
                                     f"({'; '.join(differences)})", field="--model")
        for name, (_, fp) in fingerprints.items():
            self.store.check_model(self.spec.grid, name, fp)
        self.names = list(fingerprints)
        self.cells_total = len(self.wanted) * len(self.names)

    def _record(self, demand: dict) -> None:
        spec = self.spec
        self.run_id = self.store.create_run({
            "run_id": self.planned_id, "grid": spec.grid, "model": ", ".join(self.names), "status": RunStatus.QUEUED,
            "spec": {**spec.to_dict(), "launcher": {
                "ray": self.address or "local", "shards": self.shards,
                "parts": str(self.folder), "transfer": self._transfer()}}})
        self.events_path = str(default_events_path(self.run_id))
        self.events = EventLog(self.events_path, self.run_id)
        self.store.update_run(self.run_id, status=RunStatus.RUNNING, pid=os.getpid(),
                              pid_started=process_start(os.getpid()), started_at=utc_now(),
                              events_path=self.events_path, cells_total=self.cells_total)

    def _transfer(self) -> str:
        return "shared folder" if self.shared else "ray object store"

    def _execute(self, demand: dict) -> str:
        ray = self.ray
        if self.shared:
            (self.folder / LAUNCH_MARKER.format(self.run_id)).write_text("")
        task = ray.remote(evaluate_shard).options(
            num_cpus=demand["CPU"], num_gpus=demand["GPU"], max_retries=TASK_RETRIES,
            retry_exceptions=False)
        # The cells the store holds already: a worker skips them as if its parts held them.
        held = {name: ray.put(sorted((name, i, c) for i, c in
                                     self.store.done_keys(self.spec.grid, name)))
                for name in self.names}
        share = demand["GPU"] if 0 < demand["GPU"] < 1 else None
        specs = task_specs(self.spec, self.shards)
        pending = {}
        for index, (spec, name) in enumerate(zip(specs, _names_per_task(self.names,
                                                                         self.shards))):
            plan = {"launch": self.run_id, "task": index, "gpu_share": share,
                    "folder": str(self.folder) if self.shared else None}
            pending[task.remote(spec.to_dict(), plan, held[name])] = spec
        self.store.update_run(self.run_id, provenance={
            "launcher": "ray", "address": self.address or "local", "shards": self.shards,
            "tasks": len(pending), "gpus_per_task": demand["GPU"], "gpu_share": share,
            "cpus_per_task": demand["CPU"], "task_retries": TASK_RETRIES,
            "ray_version": ray.__version__, "parts": str(self.folder),
            "transfer": self._transfer()})
        self.emit("started", grid=self.spec.grid, models=self.names,
                  items=len({i for i, _ in self.wanted}), configs=self.spec.configs,
                  cells_total=self.cells_total, cells_done=self.cells_in_parts(),
                  events_path=self.events_path, resumed=False, tasks=len(pending))
        last = self.cells_in_parts()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in ready:
                spec = pending.pop(ref)
                what = f"task {spec.models[0]} shard {spec.shard[0]}/{spec.shard[1]}"
                try:
                    result = ray.get(ref)
                except Exception as exc:  # a task's error, or its worker died past retries
                    for other in pending:
                        ray.cancel(other, force=True)
                    raise RunFailed(f"{what} failed: {_task_error(exc)}") from None
                if result.get("files"):
                    unpack(result["files"], self.folder)
                self.merge()
                if result["status"] != RunStatus.FINISHED:  # its worker was told to stop
                    raise RunFailed(f"{what} ended {result['status']} on node "
                                    f"{result['node']}")
                self._check_task(what, result)
            last = self._progress(last)
        return RunStatus.FINISHED

    def _check_task(self, what: str, result: dict) -> None:
        """Every cell a task's runs wrote is in the store after the merge, or the launch
        fails: a part lost on the way never ends as a finished run with cells missing."""
        for run_id, written in sorted(result["runs"].items()):
            merged = self.store.cells_of_run(self.spec.grid, run_id)
            if merged != written:
                where = ("is --out-parts a folder every node sees at the same path?"
                         if self.shared else "lost between the worker and the driver")
                raise RunFailed(f"{what} on node {result['node']}: its run {run_id} wrote "
                                f"{written} cells but the store holds {merged} of them after "
                                f"the merge of {self.folder} ({where})")

    def _cells_of_launch(self) -> int:
        return sum(len(self.wanted & self.store.done_keys(self.spec.grid, name))
                   for name in self.names)

    def _missing_cells(self) -> str | None:
        for name in self.names:
            missing = sorted(self.wanted - self.store.done_keys(self.spec.grid, name))
            if missing:
                item, config = missing[0]
                return (f"every task finished but {len(missing)} of {len(self.wanted)} cells "
                        f"of {name} are not in the store (first: item {item}, config {config});"
                        f" parts were lost: run the same command again to compute them")
        return None

    def _progress(self, last: int) -> int:
        done = min(self.cells_in_parts(), self.cells_total)
        elapsed = time.monotonic() - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        if done == last:
            return done
        tokens = self.tokens_in_runs()
        self.store.update_run(self.run_id, cells_done=done, tokens=tokens, seconds=elapsed)
        self.emit("batch", model="all", cells_done=done, cells_total=self.cells_total,
                  batch_cells=done - last, tokens=tokens, tokens_per_s=tokens / elapsed,
                  elapsed_s=elapsed,
                  eta_s=(self.cells_total - done) / rate if rate > 0 else None)
        return done

    def _init_cluster(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        self._owns_ray = True
        if self.address:
            ray.init(address=self.address, log_to_driver=False)
            return
        # A local cluster of this machine only; it ends with the driver.
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=max(os.cpu_count() or 1, self.spec.threads),
                 include_dashboard=False, log_to_driver=False)

    def _gpus_per_task(self) -> float:
        if self.gpus_per_task is not None:
            return self.gpus_per_task
        if self.spec.device.startswith("cpu"):
            return 0
        return 1 if self.ray.cluster_resources().get("GPU", 0) >= 1 else 0

    def _shutdown(self) -> None:
        """Disconnect what this launch connected (a remote cluster keeps running)."""
        if self._owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
        if self.shared and self.run_id:
            (self.folder / LAUNCH_MARKER.format(self.run_id)).unlink(missing_ok=True)


def _names_per_task(names: list[str], shards: int) -> list[str]:
    """The grid name of each task's model, in task_specs' order (model-major)."""
    return [name for name in names for _ in range(shards)]


def _on_node(node_id: str):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def _task_error(exc: Exception) -> str:
    cause = getattr(exc, "cause", None)
    return str(cause) if cause is not None else f"{type(exc).__name__}: {exc}"


def _default_folder(store, run_id: str) -> Path:
    """`<user data>/parts/<store>/<run>`: the launch's own folder, so a launch merges only
    its own parts, never another store's or an earlier launch's leftovers; the store as a
    hash of its path, the run id as made by new_run_id (no name typed by a user becomes a
    path: a grid named `../../x` writes nowhere else)."""
    import hashlib

    where = str(Path(getattr(store, "path", "store")).expanduser().resolve())
    return settings.data_dir() / "parts" / hashlib.sha256(where.encode()).hexdigest()[:16] \
        / run_id
