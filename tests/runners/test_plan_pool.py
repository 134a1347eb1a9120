"""Planning in worker processes (runners/run/plan_pool.py, issue 59 item 2): the same
plans as on the host thread, in order, a few chunks ahead; the same cells from a run; a
worker that dies is a clear run failure, not a hang."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.harness.fewshot import pools_by_benchmark  # noqa: E402
from fragility_tui.items.item import Item  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from helpers import run_cli  # noqa: E402
from plan_pool_cases import DyingEncoder  # noqa: E402
from runners.plan.item_requests import Encoder, plan_one  # noqa: E402
from runners.run.plan_pool import PlanPool, PlanWorkerDied, auto_workers  # noqa: E402
from test_ray_launch import common_args  # noqa: E402
from test_run_loop import assert_same_cells, cells_of  # noqa: E402

CONFIGS = ["o0.letter", "o3.digit+nobos", "o1.paren.lik", "cloze_qa", "o2.letter+k2"]
ITEMS = [Item(f"toy/{i}", "toy", None, f"Which of these is number {i}?",
              (f"{i}", f"{i + 1}", f"{i + 2}", f"{i + 3}"), i % 4) for i in range(11)]


def test_processes_plan_what_the_host_thread_plans_in_order(tiny_tokenizer):
    encoder, pools = Encoder(tiny_tokenizer, True), pools_by_benchmark(ITEMS)
    todo = [(item, CONFIGS) for item in ITEMS]
    pool = PlanPool(encoder, todo, 3, pools, workers=2, chunk=3, ahead=2)
    try:
        for item, configs in todo:
            assert len(pool.waiting) <= 2  # never more than `ahead` chunks out
            got, want = pool.take(), plan_one(encoder, item, configs, 3, pools)
            assert got.plan.item == item
            assert [(r.key, r.tokens) for r in got.gen] == [(r.key, r.tokens) for r in want.gen]
            assert [(r.key, r.tokens, r.scored_from) for r in got.lik] == \
                [(r.key, r.tokens, r.scored_from) for r in want.lik]
            assert got.unique_tokens == want.unique_tokens
            assert got.plan.prompts == want.plan.prompts  # +k2: the same solved examples
        with pytest.raises(IndexError):
            pool.take()
    finally:
        pool.close()


def test_a_planning_process_that_dies_is_a_run_failure_naming_the_items(tiny_tokenizer):
    encoder = DyingEncoder(tiny_tokenizer, True)
    encoder.dies_on = "number 7?"
    todo = [(item, ["o0.letter"]) for item in ITEMS]
    pool = PlanPool(encoder, todo, 0, None, workers=2, chunk=4)
    try:
        taken = [pool.take() for _ in range(4)]  # the first chunk (items 1-4) is whole
        assert [p.plan.item for p in taken] == ITEMS[:4]
        with pytest.raises(PlanWorkerDied, match=r"died while planning items 5-8 of 11"):
            for _ in range(4):
                pool.take()
    finally:
        pool.close()


def test_auto_plans_in_processes_only_beside_a_gpu():
    assert auto_workers("cpu", cpus=16) == 0
    assert auto_workers("cuda:0", cpus=16) == 8 and auto_workers("cuda", cpus=4) == 2
    assert auto_workers("cuda", cpus=2) == 0


@pytest.mark.slow
def test_a_run_planned_in_processes_gives_the_host_threads_cells(tiny_folder, whole,
                                                                 tmp_path):
    """The `whole` grid (tests/runners/conftest.py) is planned on the host thread (auto on a
    CPU); the same run with --plan-workers 2 makes the same cells and records it."""
    items, cells = whole
    db = tmp_path / "processes.duckdb"
    run_cli("run", *common_args(tiny_folder, items), "--plan-workers", "2", db=db,
            timeout=300, check=True)
    store = Store(db)
    assert_same_cells(cells_of(store, "g"), cells)
    overlap = store.runs()[0].to_dict()["provenance"]["host_overlap"]
    assert [record["plan_workers"] for record in overlap.values()] == [2]


def test_plan_workers_must_be_a_count_or_auto(tmp_path):
    done = run_cli("run", "--model", "x", "--items", "x.jsonl", "--grid", "g",
                   "--plan-workers", "-1", db=tmp_path / "s.duckdb")
    assert done.returncode == 2
    assert "--plan-workers must be 0 or more, or auto, got '-1'" in done.stderr
