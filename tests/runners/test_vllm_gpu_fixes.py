"""Issue 46's vLLM defects, each shown on the CPU: the engine's memory share sized from the
memory free at its start (vLLM 0.30 refuses to start below it), the batch-invariant module
where vLLM 0.30 ships it, and a vLLM run's batches planned on the host thread while the
engine runs."""

from __future__ import annotations

import math
import threading

import pytest

torch = pytest.importorskip("torch")

from runners.backends import vllm as vllm_backend  # noqa: E402
from test_run_loop import spec_for, write_items  # noqa: E402
from test_vllm_backend import fake_vllm  # noqa: E402,F401 (the fixture)

GIB = 1 << 30


def test_the_engine_share_fits_the_memory_free_at_its_start(monkeypatch):
    """vLLM 0.30 (vllm/v1/worker/utils.py, request_memory) asks for ceil(total x
    gpu_memory_utilization) and raises when less than that is free at its start. With 60
    of 141 GiB free (this process's transformers models hold the rest) the share must fit
    the free memory less what stays outside the engine; sized from the total, it asked for
    ~0.8 x 141 GiB."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (60 * GIB, 141 * GIB))
    free, total = vllm_backend._gpu_memory("cuda")
    sizing = vllm_backend.engine_memory(total, 151_936, free)
    outside = (sizing["max_num_batched_tokens"] * 151_936 * 4 * vllm_backend.PROMPT_LOGPROB_COPIES
               + vllm_backend.ENGINE_RESERVE)
    requested = math.ceil(total * sizing["gpu_memory_utilization"])
    assert requested <= free - outside
    assert "60.0 GiB free of 141.0 GiB" in sizing["reason"]
    empty = vllm_backend.engine_memory(141 * GIB, 151_936, 141 * GIB)  # nothing else there
    assert empty == vllm_backend.engine_memory(141 * GIB, 151_936)  # free defaults to all
    assert empty["gpu_memory_utilization"] > 0.88
    with pytest.raises(Exception, match="0.0 GiB of the 141.0 GiB GPU are free"):
        vllm_backend.engine_memory(141 * GIB, 151_936, 20 * GIB // 1000)


def test_batch_invariance_finds_the_module_where_vllm_030_ships_it(monkeypatch):
    """vLLM 0.30.0's wheel has vllm/model_executor/determinism/batch_invariant.py and no
    vllm/model_executor/layers/batch_invariant.py: looking only there, the mode was never
    turned on."""
    shipped = {"vllm", "vllm.model_executor", "vllm.model_executor.determinism",
               "vllm.model_executor.determinism.batch_invariant",
               "vllm.model_executor.layers"}
    monkeypatch.setattr(vllm_backend, "installed_version", lambda: "0.30.0")
    monkeypatch.setattr(vllm_backend.importlib.util, "find_spec",
                        lambda name: object() if name in shipped else None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    environ = {}
    assert vllm_backend.batch_invariance(environ)["enabled"]
    assert environ == {"VLLM_BATCH_INVARIANT": "1"}


def test_a_vllm_runs_batches_are_planned_on_the_host_thread(tiny_folder, tmp_path, monkeypatch,
                                                          fake_vllm):  # noqa: F811
    """Planning a batch (templates, tokenising, prompt trees: ~14 ms an item) ran on the
    main thread between engine calls, the GPU waiting; now on the host worker, as the
    transformers backend plans."""
    from fragility_tui.store.store import Store
    from runners.plan import item_requests
    from runners.run.loop import Run

    threads = []
    original = item_requests.ItemPlanner.batch

    def batch(self, budget):
        threads.append(threading.current_thread().name)
        return original(self, budget)

    monkeypatch.setattr(item_requests.ItemPlanner, "batch", batch)
    items = write_items(tmp_path / "items.jsonl", 3)
    spec = spec_for(tiny_folder, items, backend="vllm")
    spec.batch_size = 1  # three batches
    run = Run(spec, Store(tmp_path / "s.duckdb"), display="none")
    assert run.execute() == "finished"
    assert len(threads) >= 3 and all(t.startswith("fragility-host") for t in threads), threads
