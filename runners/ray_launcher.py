"""`fragility-tui run ... --ray [ADDRESS] --shards N`: one Ray task per (model, shard).

Each task runs the ordinary run loop into Parquet parts under one shared folder
(`run --out-parts`, store/parts.py), with the GPUs it asks Ray for; Ray retries a task whose
worker process dies, and the retry skips the cells its predecessor's parts hold. The driver
merges the folder into the store as tasks finish (store/merge.py: idempotent), and records
itself as a run with a JSON-lines events file, so the Runs pane shows its progress like any
other run's. Without an ADDRESS it starts a local cluster on this machine.

Every node must have fragility-tui (with the `runner` and `cluster` extras) installed and
see the models, the item files and the parts folder at the same paths.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from fragility_tui import settings
from fragility_tui.errors import InputError
from fragility_tui.processes import process_start
from fragility_tui.store.runs import RunStatus
from fragility_tui.store.schema import utc_now
from runners.events import Display, EventLog, default_events_path
from runners.admission import check_grid, load_run_items
from runners.loop import RunFailed, RunSpec, prepare_models

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


def evaluate_shard(spec_dict: dict, folder: str) -> dict:
    """A Ray task's body: the run loop for one (model, shard), into parts under `folder`."""
    from fragility_tui.store.parts import PartsStore
    from runners.loop import Run

    run = Run(RunSpec.from_dict(spec_dict), PartsStore(folder), display="none")
    return {"run_id": run.run_id, "status": run.execute(), "shard": spec_dict["shard"],
            "model": spec_dict["models"][0]}


def task_specs(spec: RunSpec, shards: int) -> list[RunSpec]:
    """One spec per (model, shard), in submission order (model-major)."""
    return [replace(spec, models=[model], shard=[i, shards])
            for model in spec.models for i in range(shards)]


class Launch:
    """The driver: submits the tasks, merges and reports progress, records one run row."""

    def __init__(self, spec: RunSpec, store, *, address: str | None, shards: int,
                 folder: str | None, gpus_per_task: float | None, display: str = "plain"):
        if shards < 1:
            raise InputError("--shards must be at least 1", field="--shards")
        if spec.shard:
            raise InputError("--ray makes the shards itself (--shards N); drop --shard",
                             field="--shard")
        self.ray = require_ray()
        self.spec, self.store, self.address, self.shards = spec, store, address, shards
        # Refused before starting: items that do not load, a grid that cannot take the cells.
        check_grid(store, spec, load_run_items(spec).set_hash)
        self.names = [p.name for p in prepare_models(spec, store)]
        self.folder = Path(folder) if folder else _default_folder(spec.grid)
        self.gpus_per_task = gpus_per_task
        self.display = Display(display)
        self.run_id = store.create_run({
            "grid": spec.grid, "model": ", ".join(self.names), "status": RunStatus.QUEUED,
            "spec": {**spec.to_dict(), "launcher": {
                "ray": address or "local", "shards": shards, "parts": str(self.folder)}}})
        self.events_path = str(default_events_path(self.run_id))
        self.events: EventLog | None = None
        self.counted: dict[str, int] = {}  # part file -> cells (parts never change)
        self.cells_total = 0
        self.started = time.monotonic()

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
        self.events = EventLog(self.events_path, self.run_id)
        self.store.update_run(self.run_id, status=RunStatus.RUNNING, pid=os.getpid(),
                              pid_started=process_start(os.getpid()), started_at=utc_now(),
                              events_path=self.events_path)
        try:
            status, error = self._execute(), None
        except KeyboardInterrupt:
            status, error = RunStatus.CANCELLED, "interrupted"
        except Exception as exc:
            status, error = RunStatus.FAILED, str(exc)
        finally:
            self._shutdown()
        merged = self.merge()  # whatever the workers committed is kept
        done = self.store.count_cells(self.spec.grid) if merged else 0
        tokens, seconds = self.tokens_in_runs(), time.monotonic() - self.started
        self.store.update_run(self.run_id, status=status, ended_at=utc_now(), error=error,
                              cells_done=done, tokens=tokens, seconds=seconds)
        self.emit(status if status != RunStatus.FAILED else "failed",
                  **({"reason": error} if error else {}), cells_done=done,
                  cells_total=self.cells_total, tokens=tokens, seconds=seconds)
        self.events.close()
        if status == RunStatus.FAILED:
            raise RunFailed(error)
        return status

    def _execute(self) -> str:
        from fragility_tui.items.loaders import load_many

        ray = self.ray
        items, _ = load_many(self.spec.items, per_benchmark=self.spec.per_benchmark,
                             seed=self.spec.seed)
        self.cells_total = len(items) * len(self.spec.configs) * len(self.names)
        self._init_cluster()
        gpus = self._gpus_per_task()
        task = ray.remote(evaluate_shard).options(
            num_cpus=self.spec.threads, num_gpus=gpus, max_retries=TASK_RETRIES,
            retry_exceptions=False)
        pending = {task.remote(s.to_dict(), str(self.folder)): s for s in
                   task_specs(self.spec, self.shards)}
        self.store.update_run(self.run_id, cells_total=self.cells_total, provenance={
            "launcher": "ray", "address": self.address or "local", "shards": self.shards,
            "tasks": len(pending), "gpus_per_task": gpus, "task_retries": TASK_RETRIES,
            "ray_version": ray.__version__, "parts": str(self.folder)})
        self.emit("started", grid=self.spec.grid, models=self.names, items=len(items),
                  configs=self.spec.configs, cells_total=self.cells_total,
                  cells_done=self.cells_in_parts(), events_path=self.events_path,
                  resumed=False, tasks=len(pending))
        last = self.cells_in_parts()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in ready:
                spec = pending.pop(ref)
                try:
                    ray.get(ref)
                except Exception as exc:  # a task's error, or its worker died past retries
                    for other in pending:
                        ray.cancel(other, force=True)
                    raise RunFailed(f"task {spec.models[0]} shard {spec.shard[0]}/"
                                    f"{spec.shard[1]} failed: {_task_error(exc)}") from None
                self.merge()
            last = self._progress(last)
        return RunStatus.FINISHED

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
        if not self.address and self.ray.is_initialized():
            self.ray.shutdown()


def _task_error(exc: Exception) -> str:
    cause = getattr(exc, "cause", None)
    return str(cause) if cause is not None else f"{type(exc).__name__}: {exc}"


def _default_folder(grid: str) -> Path:
    return settings.data_dir() / "parts" / grid
