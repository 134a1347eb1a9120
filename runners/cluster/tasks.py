"""What runs on a Ray worker for `run --ray` (the driver is runners/cluster/launcher.py).

Two task bodies:

- `probe_node`: before any cell is computed, on every node that can run a task, with the
  resources a task asks for: are the item files and model folders there, does
  `--out-parts` (when given) lead to the driver's folder, and what fingerprint does each
  model get *on this node's device* (a CPU-only head may launch `--device cuda`).
- `evaluate_shard`: the ordinary run loop for one (model, shard). Without `--out-parts`
  its parts go to a scratch folder on the worker's own node and come back to the driver
  in the task's return value (Ray's object store): no folder is shared between nodes.
  With `--out-parts` they go straight to that folder, which every node must see.

Either way the task reports how many cells each of its runs wrote, so the driver can
check that the store holds every one of them after the merge.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.store.parts import CELLS, RUNS, PartsStore, read_json, visible_files

LAUNCH_MARKER = ".launch-{}"  # written by the driver into --out-parts; dot: merge skips it


class TaskFailed(Exception):
    """A task's own failure, with the node it ran on (Ray hands it to the driver)."""


class _NoStore:
    """The probe's sink: fingerprints are compared by the driver, against its store."""

    def check_model(self, grid, model, fingerprint) -> None:
        return None


class SeededParts(PartsStore):
    """A parts folder that also treats the cells the driver's store holds as done, so a
    worker whose scratch folder is new does not compute them again (and the driver's
    count of merged cells equals what the worker wrote)."""

    def __init__(self, folder, held: list):
        super().__init__(folder)
        self._seeded: dict[str, set] = {}
        for model, item, config in held:
            self._seeded.setdefault(model, set()).add((item, config))

    def done_keys(self, grid: str, model: str) -> set[tuple[str, str]]:
        return super().done_keys(grid, model) | self._seeded.get(model, set())


def node_label() -> str:
    import ray

    context = ray.get_runtime_context()
    return f"{ray.util.get_node_ip_address()} ({context.get_node_id()[:8]})"


def probe_node(spec_dict: dict, paths: list[str], marker: str | None) -> dict:
    """What this node would make of the launch; errors are returned, not raised, so the
    driver can name every node that cannot take part."""
    from runners.run.failure import failure_reason
    from runners.run.loop import RunSpec, prepare_models

    found = {"node": node_label(),
             "missing": [p for p in paths if not os.path.exists(p)], "models": {}}
    if marker and not os.path.isfile(marker):
        found["error"] = (f"--out-parts {Path(marker).parent} here is not the driver's folder "
                          "(the launch's marker file is not in it): give a folder every node "
                          "sees at the same path, or leave --out-parts out to send the parts "
                          "through Ray's object store")
        return found
    if found["missing"]:
        return found
    try:
        prepared = prepare_models(RunSpec.from_dict(spec_dict), _NoStore())
    except Exception as exc:  # shown to the user with the node's name
        found["error"] = failure_reason(exc)
        return found
    found["models"] = {p.name: p.fingerprint for p in prepared}
    return found


def evaluate_shard(spec_dict: dict, plan: dict, held: list) -> dict:
    """A Ray task's body: the run loop for one (model, shard).

    plan: launch (the driver's run id), task (its index), folder (--out-parts, or None for
    a scratch folder shipped back), gpu_share (the task's fraction of a GPU, or None)."""
    from runners.run.failure import failure_reason
    from runners.run.loop import Run, RunSpec

    shared = plan.get("folder")
    folder = Path(shared) if shared else scratch_folder(plan["launch"], plan["task"])
    node = node_label()
    if shared and not (folder / LAUNCH_MARKER.format(plan["launch"])).is_file():
        raise TaskFailed(f"on node {node}: --out-parts {folder} is not the driver's folder")
    try:
        with gpu_share(plan.get("gpu_share")):
            store = SeededParts(folder, held)
            run = Run(RunSpec.from_dict(spec_dict), store, display="none")
            status = run.execute()
        runs = cells_per_run(folder) if not shared else {run.run_id: _cells_of(folder,
                                                                               run.run_id)}
        files = None if shared else pack(folder)
    except Exception as exc:
        if not shared:
            shutil.rmtree(folder, ignore_errors=True)
        raise TaskFailed(f"on node {node}: {failure_reason(exc)}") from None
    if not shared:  # shipped in the return value; a killed worker's folder stays for its retry
        shutil.rmtree(folder, ignore_errors=True)
    return {"node": node, "run_id": run.run_id, "status": str(status), "runs": runs,
            "files": files}


def scratch_folder(launch: str, task: int) -> Path:
    """This node's own folder for one task's parts (a retry on the same node resumes it)."""
    from fragility_tui import settings

    return settings.cache_dir() / "ray-parts" / launch / f"task-{task:05d}"


def _cells_of(folder: Path, run_id: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(p).num_rows
               for p in visible_files(folder / CELLS, f"{run_id}-*.parquet"))


def cells_per_run(folder: Path) -> dict[str, int]:
    """Every run recorded in the folder (a killed attempt's too) and the cells its parts hold."""
    return {read_json(p)["run_id"]: _cells_of(folder, read_json(p)["run_id"])
            for p in visible_files(folder / RUNS, "*.json")}


def pack(folder: Path) -> dict[str, bytes]:
    """The folder's whole files, by path relative to it (temporary files left out)."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".")}


def unpack(files: dict[str, bytes], folder: Path) -> None:
    """Write a task's shipped files under the driver's folder, each whole or not at all."""
    from fragility_tui.files import write_atomic

    for rel, data in files.items():
        target = (folder / rel).resolve()
        if folder.resolve() not in target.parents:  # names come from another process
            raise InputError(f"a task sent a file outside the parts folder: {rel}",
                             path=str(folder))
        write_atomic(target, lambda tmp, data=data: tmp.write_bytes(data))


@contextmanager
def gpu_share(share: float | None):
    """A fractional GPU (`--gpus-per-task 0.5`): this process may allocate only its share
    of the GPU, and sees only that share when it sizes its weights' placement and its
    token budget (both read torch.cuda.mem_get_info), instead of every task on the GPU
    budgeting the whole of its free memory."""
    if share is None or not 0 < share < 1:
        yield
        return
    import torch

    if not torch.cuda.is_available():
        yield
        return
    real = torch.cuda.mem_get_info
    devices = range(torch.cuda.device_count())

    def visible(device=None):
        free, total = real(device)
        mine = int(total * share)
        return max(0, min(free, mine - torch.cuda.memory_reserved(device))), mine

    for index in devices:
        torch.cuda.set_per_process_memory_fraction(share, index)
    torch.cuda.mem_get_info = visible
    try:
        yield
    finally:  # Ray reuses worker processes: the next task gets the whole view back
        torch.cuda.mem_get_info = real
        for index in devices:
            torch.cuda.set_per_process_memory_fraction(1.0, index)
