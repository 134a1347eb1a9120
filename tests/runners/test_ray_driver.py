"""The Ray driver's and workers' pieces that need no cluster: refusing a task shape no node
holds (with the numbers), absolute paths before shipping, a fractional GPU's memory view,
the shipped files' unpacking, seeded done cells, and the per-task cell count check."""

from __future__ import annotations

from pathlib import Path

import pytest

from fragility_tui.errors import InputError
from runners.run.failure import RunFailed
from runners.run.loop import RunSpec
from runners.cluster.launcher import Launch, absolute_paths, feasible_nodes
from runners.cluster.tasks import SeededParts, pack, unpack


def node(ip, cpus, gpus=0, alive=True):
    resources = {"CPU": float(cpus), "memory": 1e9, **({"GPU": float(gpus)} if gpus else {})}
    return {"Alive": alive, "NodeManagerAddress": ip, "NodeID": ip.replace(".", "") * 4,
            "Resources": resources}


def test_a_task_shape_no_node_holds_is_refused_with_asked_and_available():
    nodes = [node("10.0.0.1", 1), node("10.0.0.2", 1), node("10.0.0.3", 8, alive=False)]
    with pytest.raises(InputError) as caught:
        feasible_nodes({"CPU": 2.0, "GPU": 0.0}, nodes)
    text = str(caught.value)
    assert "each asks for 2 CPU, 0 GPU" in text
    assert "10.0.0.1 (10001100): 1 CPU, 0 GPU; 10.0.0.2 (10002100): 1 CPU, 0 GPU" in text
    assert "10.0.0.3" not in text  # a dead node holds nothing
    with pytest.raises(InputError, match=r"asks for 1 CPU, 0\.5 GPU.*--gpus-per-task"):
        feasible_nodes({"CPU": 1.0, "GPU": 0.5}, nodes)
    gpu = node("10.0.0.4", 4, gpus=1)
    assert feasible_nodes({"CPU": 2.0, "GPU": 0.5}, nodes + [gpu]) == [gpu]


def test_paths_are_made_absolute_before_tasks_are_shipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "items.jsonl").write_text("")
    (tmp_path / "my-model").mkdir()
    spec = absolute_paths(RunSpec(models=["my-model", "smollm2-135m-instruct"],
                                  items=["items.jsonl"], grid="g"))
    assert spec.items == [str(tmp_path / "items.jsonl")]
    assert spec.models == [str(tmp_path / "my-model"), "smollm2-135m-instruct"]


def test_a_missing_item_file_is_refused_by_the_driver(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"items.jsonl.*no such item file"):
        Launch(RunSpec(models=["m"], items=["items.jsonl"], grid="g"), None, address=None,
               shards=1, folder=None, gpus_per_task=None)


@pytest.mark.parametrize("gpus", [-1, 1.5])
def test_gpus_per_task_is_a_share_or_whole_gpus(gpus):
    with pytest.raises(InputError, match="--gpus-per-task"):
        Launch(RunSpec(models=["m"], items=["i"], grid="g"), None, address=None, shards=1,
               folder=None, gpus_per_task=gpus)


def test_a_fractional_gpu_budgets_its_share(monkeypatch):
    """With CUDA mocked: half a GPU of 80 GiB with 60 GiB free sees 40 GiB, caps its
    allocator at half, and both come back when the task ends."""
    torch = pytest.importorskip("torch")
    from runners.backends.transformers.memory import initial_budget
    from runners.cluster.tasks import gpu_share

    gib = 2**30
    fractions = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (60 * gib, 80 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 2 * gib)
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda share, index: fractions.append((share, index)))
    whole = initial_budget(1000, "cuda:0", None, 2).ceiling
    with gpu_share(0.5):
        assert torch.cuda.mem_get_info(0) == (38 * gib, 40 * gib)  # 40 less its 2 reserved
        half = initial_budget(1000, "cuda:0", None, 2).ceiling
    assert torch.cuda.mem_get_info(0) == (60 * gib, 80 * gib)
    assert fractions == [(0.5, 0), (1.0, 0)]
    assert half < whole and abs(half / whole - 38 / 60) < 0.01
    with gpu_share(1.0):  # a whole GPU: nothing changes
        assert torch.cuda.mem_get_info(0) == (60 * gib, 80 * gib)
    assert fractions == [(0.5, 0), (1.0, 0)]


def test_shipped_files_arrive_whole_and_stay_inside_the_folder(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "cells").mkdir(parents=True)
    (src / "cells" / "r-000001.parquet").write_bytes(b"PAR1")
    (src / "cells" / ".r-000002.parquet.9.tmp").write_bytes(b"half")
    (src / "runs").mkdir()
    (src / "runs" / "r.json").write_text("{}")
    files = pack(src)
    assert sorted(files) == ["cells/r-000001.parquet", "runs/r.json"]
    unpack(files, dst)
    assert (dst / "cells" / "r-000001.parquet").read_bytes() == b"PAR1"
    with pytest.raises(InputError, match=r"outside the parts folder: \.\./evil"):
        unpack({"../evil": b"x"}, dst)
    assert not (tmp_path / "evil").exists()


def test_seeded_parts_skip_the_cells_the_store_holds(tmp_path):
    parts = SeededParts(tmp_path, [("m", "i1", "o0.letter"), ("n", "i2", "cloze_qa")])
    assert parts.done_keys("g", "m") == {("i1", "o0.letter")}
    assert parts.done_keys("g", "other") == set()


class _Store:
    def __init__(self, held: int):
        self.held = held

    def cells_of_run(self, grid: str, run_id: str) -> int:
        return self.held


def test_a_task_whose_cells_are_not_all_merged_fails_loudly():
    launch = Launch.__new__(Launch)
    launch.spec, launch.folder, launch.shared = RunSpec(["m"], ["i"], "g"), Path("/p"), False
    launch.store = _Store(held=11)
    result = {"node": "10.0.0.2 (abcd1234)", "runs": {"r1": 12}}
    with pytest.raises(RunFailed, match=r"task m shard 1/2 on node 10\.0\.0\.2 \(abcd1234\): "
                                        r"its run r1 wrote 12 cells but the store holds 11"):
        launch._check_task("task m shard 1/2", result)
    launch.shared = True
    with pytest.raises(RunFailed, match="is --out-parts a folder every node sees"):
        launch._check_task("task m shard 1/2", result)
    launch.store = _Store(held=12)
    launch._check_task("task m shard 1/2", result)  # all there: no error
