"""`run --backend vllm` against a fake engine of vLLM's interface (fake_vllm.py), computed
by the tiny transformers model: request construction, result mapping, the early-stop cut,
and cells equal to the transformers backend's. vLLM itself is not installed here and has
never run this code (docs/runner.md, *vLLM backend*)."""

from __future__ import annotations

import importlib.util
import re
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from fake_vllm import FakeLLM, Logprob, SamplingParams  # noqa: E402
from fragility_tui.errors import InputError  # noqa: E402
from fragility_tui.harness.configs import CONFIG_IDS  # noqa: E402
from fragility_tui.items.item import Item  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from helpers import run_cli  # noqa: E402
from runners.backends import vllm as vllm_backend  # noqa: E402
from runners.plan.item_requests import Encoder, cells_for, plan_item  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402
from runners.backends.transformers.scoring import LikelihoodRequest, Scorer  # noqa: E402
from runners.backends.vllm import VLLMScorer, continuation_loglikelihood  # noqa: E402
from test_run_loop import assert_same_cells, cells_of, spec_for, write_items  # noqa: E402

ITEMS = [
    Item("toy/1", "toy", None, "Which gas do plants absorb from the air?",
         ("oxygen", "nitrogen", "carbon dioxide", "helium"), 2),
    Item("toy/2", "toy", None, "A man is sitting on a roof. He",
         ("starts pulling up roofing.", "is ripping level tiles off.",
          "holds a rope.", "sings a song about water."), 0),
]


def _planned(tokenizer):
    gen, lik = [], []
    plans = [plan_item(Encoder(tokenizer, True), item, list(CONFIG_IDS), 0, gen, lik)
             for item in ITEMS]
    return plans, gen, lik


def _rows(plans, result):
    return {(r.item_uid, r.config_id): (r.correct, r.pred, r.permutation, r.raw_output, r.scores)
            for plan in plans for r in cells_for(plan, result, "tiny", None, 0.0)}


def test_vllm_requests_and_results_give_the_transformers_cells(tiny_model, tiny_tokenizer):
    plans, gen, lik = _planned(tiny_tokenizer)
    eos = {tiny_tokenizer.eos_token_id}
    engine = FakeLLM(tiny_model, tiny_tokenizer)
    scorer = VLLMScorer(engine, tiny_tokenizer, eos, max_new_tokens=16,
                        sampling_params=SamplingParams)
    got = scorer.score(gen, lik, max_slots=512)
    # One engine call: the planner's own token ids as token-id prompts, generation first.
    [(prompts, params)] = engine.calls
    assert prompts == [{"prompt_token_ids": r.tokens} for r in gen + lik]
    assert params[:len(gen)] == [SamplingParams(temperature=0.0, max_tokens=16,
                                                stop_token_ids=sorted(eos),
                                                detokenize=False)] * len(gen)
    assert params[len(gen):] == [SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=1,
                                                detokenize=False)] * len(lik)
    expected = Scorer(tiny_model, tiny_tokenizer, eos).score(gen, lik)
    mine, theirs = _rows(plans, got), _rows(plans, expected)
    assert mine.keys() == theirs.keys() and len(mine) == 2 * 26
    for key, (correct, pred, perm, raw, scores) in mine.items():
        assert (correct, pred, perm, raw) == theirs[key][:4], key
        if scores is not None:
            assert scores == pytest.approx(theirs[key][4], abs=1e-4), key
    for key, generation in got.generations.items():
        assert (generation.new_tokens, generation.stop) == (
            expected.generations[key].new_tokens, expected.generations[key].stop), key
    # The engine decoded past the parser's decision; the cut is where transformers stops.
    engine_tokens = {r.key: len(o.outputs[0].token_ids)
                     for r, o in zip(gen, engine.generate(prompts[:len(gen)], params[0]))}
    cut = [k for k, g in got.generations.items()
           if g.stop == "decided" and engine_tokens[k] > g.new_tokens]
    assert cut, "no generation was cut: the early stop went untested"
    assert got.stats.total_prompt_tokens == sum(len(r.tokens) for r in gen + lik)
    assert 0 < got.stats.prompt_tokens < got.stats.total_prompt_tokens  # prefix-cache hits
    assert got.stats.decode_tokens == sum(engine_tokens.values())


def test_prompt_logprobs_sum_over_the_continuation_as_lm_eval_reads_them():
    request = LikelihoodRequest("k", [5, 6, 7, 8], 2)  # context [5, 6], continuation [7, 8]
    logprobs = [None, {6: Logprob(-1.0), 9: Logprob(-0.5, 1)},
                {7: Logprob(-2.0, 3), 1: Logprob(-0.1, 1)}, {8: Logprob(-0.25, 1)}]
    assert continuation_loglikelihood(request, logprobs) == (-2.25, 2)
    # vLLM before Logprob objects gave plain floats
    assert continuation_loglikelihood(request, [None, {6: -1.0}, {7: -2.0}, {8: -0.5}]) == (-2.5, 2)
    with pytest.raises(RuntimeError, match="no log-probability for token 8 at position 3"):
        continuation_loglikelihood(request, logprobs[:3] + [{9: Logprob(-0.1)}])
    with pytest.raises(RuntimeError, match="3 prompt log-probabilities for the 4-token"):
        continuation_loglikelihood(request, logprobs[:3])
    with pytest.raises(RuntimeError, match="none prompt log-probabilities"):
        continuation_loglikelihood(request, None)


def test_engine_tokens_are_cut_by_the_transformers_stop_rule(tiny_tokenizer):
    eos = tiny_tokenizer.eos_token_id
    words = tiny_tokenizer("The answer is B")["input_ids"]  # 5 tokens
    scorer = VLLMScorer(None, tiny_tokenizer, {eos}, max_new_tokens=6,
                        sampling_params=SamplingParams)

    def cut(token_ids, finish, decided=lambda text: False):
        request = SimpleNamespace(decided=decided)
        return scorer._cut(request, SimpleNamespace(token_ids=token_ids, finish_reason=finish))

    at_eos = cut(words[:2] + [eos], "stop")
    assert (at_eos.text, at_eos.new_tokens, at_eos.stop) == (
        tiny_tokenizer.decode(words[:2]), 2, "eos")
    decided = cut(words, "length", decided=lambda text: text.endswith("B"))
    assert (decided.stop, decided.text, decided.new_tokens) == ("decided", "The answer is B", 5)
    early = cut(words[:1], "length", decided=lambda text: True)
    assert (early.new_tokens, early.stop) == (1, "decided")
    long = cut(words + words, "length")
    assert (long.new_tokens, long.stop) == (6, "length")
    engine_stop = cut(words[:2], "stop")  # stopped at an id of the engine's own, not in eos
    assert (engine_stop.new_tokens, engine_stop.stop) == (2, "eos")


def test_backend_checks_come_before_anything_loads(monkeypatch):
    with pytest.raises(InputError, match="--quantize.*optimum-quanto"):
        vllm_backend.check_backend("int4", "auto")
    monkeypatch.setattr(vllm_backend, "installed_version", lambda: None)
    with pytest.raises(InputError, match=re.escape("pip install -e '.[vllm]'")):
        vllm_backend.check_backend(None, "auto")
    monkeypatch.setattr(vllm_backend, "installed_version", lambda: "0.0.fake")
    with pytest.raises(InputError, match="runs on a CUDA GPU; this run's device is cpu"):
        vllm_backend.check_backend(None, "cpu")
    import runners.models.load

    monkeypatch.setattr(runners.models.load, "pick_device", lambda device: device)
    with pytest.raises(InputError, match="CUDA_VISIBLE_DEVICES=1 and use --device cuda"):
        vllm_backend.check_backend(None, "cuda:1")
    assert vllm_backend.check_backend(None, "cuda:0") == "0.0.fake"


@pytest.fixture
def fake_vllm(monkeypatch):
    """The backend with the fake engine in place of vllm.LLM; the settings it was given."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    opened = []

    def open_engine(folder, settings):
        opened.append(settings)
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        engine = FakeLLM(model, AutoTokenizer.from_pretrained(folder),
                         enable_prefix_caching=settings["enable_prefix_caching"])
        return engine, SamplingParams

    monkeypatch.setattr(vllm_backend, "installed_version", lambda: "0.0.fake")
    monkeypatch.setattr(vllm_backend, "check_backend", lambda quantize, device: "0.0.fake")
    monkeypatch.setattr(vllm_backend, "open_engine", open_engine)
    return opened


def test_a_vllm_run_equals_the_transformers_grid_and_is_another_setting(tiny_folder, tmp_path,
                                                                       fake_vllm):
    from fragility_tui.store.models import FingerprintMismatch
    from fragility_tui.provenance import provenance_card

    items = write_items(tmp_path / "items.jsonl", 2)
    plain = Store(tmp_path / "transformers.duckdb")
    assert Run(spec_for(tiny_folder, items), plain, display="none").execute() == "finished"
    store = Store(tmp_path / "vllm.duckdb")
    run = Run(spec_for(tiny_folder, items, backend="vllm"), store, display="none")
    assert run.execute() == "finished"
    assert_same_cells(cells_of(store, "g"), cells_of(plain, "g"))
    assert len(cells_of(store, "g")) == 2 * 26
    [settings] = fake_vllm
    assert settings == {"dtype": "float32", "seed": 0, "tensor_parallel_size": 1,
                        "gpu_memory_utilization": 0.85, "max_num_batched_tokens": 8192,
                        "enable_prefix_caching": True, "trust_remote_code": False}
    row = store.get_run(run.run_id)
    assert row.spec["backend"] == "vllm" and row.provenance["backend"] == "vllm"
    assert row.tokens > 0 and "prompt_logprobs" in row.provenance["likelihood"]
    model = row.provenance["models"]["tiny-llama"]
    assert model["backend"] == {
        "name": "vllm", "version": "0.0.fake", "status": "experimental: not yet run on a GPU",
        "engine": settings, "memory_sizing": "GPU memory unknown: vLLM's defaults for this backend",
        "batch_invariant": {"enabled": False, "reason": "vLLM 0.0.fake has no batch-invariant mode"}}
    assert row.provenance["batching"]["tiny-llama"]["layout"].startswith("vLLM engine")
    card = provenance_card(row)
    assert "backend          vllm 0.0.fake (experimental: not yet run on a GPU)" in card
    assert "backend          transformers" in provenance_card(plain.runs()[0])
    [recorded] = store.list_models("g")
    assert recorded["fingerprint"]["backend"] == "vllm"
    # Into the transformers grid: another setting, refused before any run row is written.
    with pytest.raises(FingerprintMismatch, match="backend transformers → vllm"):
        Run(spec_for(tiny_folder, items, backend="vllm"), plain, display="none")
    assert len(plain.runs()) == 1
    assert RunSpec.from_dict({"models": ["m"], "items": ["i"], "grid": "g"}).backend == \
        "transformers"  # a run recorded before --backend replays on transformers


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_the_cli_without_vllm_fails_at_once_and_writes_nothing(tiny_folder, tmp_path):
    db = tmp_path / "s.duckdb"
    items = write_items(tmp_path / "items.jsonl", 1)
    proc = run_cli("run", "--backend", "vllm", "--model", str(tiny_folder), "--items",
                   str(items), "--grid", "g", "--display", "none", db=db)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: field '--backend': --backend vllm")
    assert "pip install -e '.[vllm]'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    store = Store(db)
    assert store.runs() == [] and not store.has_grid("g")
    two = run_cli("run", "--backend", "vllm", "--model", str(tiny_folder), "--model",
                  str(tiny_folder), "--items", str(items), "--grid", "g", db=db)
    assert two.returncode == 2 and "one --model per run" in two.stderr
    assert store.runs() == []
    help_text = " ".join(run_cli("run", "--help").stdout.split())
    assert "(experimental: not yet run on a GPU; pip install -e '.[vllm]')" in help_text


def test_engine_memory_keeps_prompt_logprob_tensors_outside_vllms_share():
    from runners.backends.vllm import ENGINE_RESERVE, engine_memory

    gib = 1 << 30
    h100 = engine_memory(80 * gib, 151_936)  # Qwen's vocabulary on an 80 GB GPU
    outside = 8192 * 151_936 * 4 * 3 + ENGINE_RESERVE  # 14.9 GB of logits + reserve
    assert h100["max_num_batched_tokens"] == 8192
    assert h100["gpu_memory_utilization"] <= (80 * gib - outside) / (80 * gib)
    assert h100["gpu_memory_utilization"] > 0.78
    small = engine_memory(24 * gib, 151_936)  # a 24 GB GPU: the step shrinks first
    assert small["max_num_batched_tokens"] == 2048  # 4096 would need 7.5 GB > a quarter
    assert small["gpu_memory_utilization"] <= 1 - (2048 * 151_936 * 12 + ENGINE_RESERVE) / (24 * gib)
    assert "151936 vocabulary" in small["reason"]
    tiny_vocab = engine_memory(80 * gib, 49_152)
    assert tiny_vocab["gpu_memory_utilization"] == 0.9  # capped: vLLM never takes it all
    with pytest.raises(InputError, match="--backend.*need .* GiB beside the engine"):
        engine_memory(8 * gib, 262_144)  # Gemma's vocabulary on an 8 GB GPU


def test_batch_invariance_is_turned_on_only_where_vllm_and_the_gpu_have_it(monkeypatch):
    import torch

    from runners.backends import vllm as vllm_backend

    assert vllm_backend.batch_invariance({"VLLM_BATCH_INVARIANT": "0"}) == {
        "enabled": False, "reason": "VLLM_BATCH_INVARIANT set by the user"}
    monkeypatch.setattr(vllm_backend, "installed_version", lambda: "0.30.0")
    monkeypatch.setattr(vllm_backend.importlib.util, "find_spec",
                        lambda name: object() if name.startswith("vllm") else None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    environ = {}
    assert not vllm_backend.batch_invariance(environ)["enabled"] and environ == {}  # an A100
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert vllm_backend.batch_invariance(environ)["enabled"]  # an H100 / H200
    assert environ == {"VLLM_BATCH_INVARIANT": "1"}
    monkeypatch.setattr(vllm_backend.importlib.util, "find_spec", lambda name: None)
    assert vllm_backend.batch_invariance({}) == {
        "enabled": False, "reason": "vLLM 0.30.0 has no batch-invariant mode"}
