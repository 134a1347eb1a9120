"""`run --backend openai` against the fake OpenAI-compatible server (fake_openai.py, on
127.0.0.1, computed by the tiny model): cells equal to the transformers backend's, the echo
probe, servers without prompt log-probabilities, retries, timeouts, bounded concurrency,
identity, shards, kill -9 and resume, and a planted API key found nowhere."""

from __future__ import annotations

import json
import os
import signal

import pytest

torch = pytest.importorskip("torch")

from fake_openai import SYSTEM_FINGERPRINT, FakeOpenAI  # noqa: E402
from fragility_tui.errors import InputError  # noqa: E402
from fragility_tui.harness.configs import parse_config_list  # noqa: E402
from fragility_tui.provenance import provenance_card  # noqa: E402
from fragility_tui.store.models import FingerprintMismatch  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from helpers import run_cli  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402
from runners.backends.openai.client import OpenAIClient, ServerError, endpoint_root  # noqa: E402
from runners.backends.openai.protocol import continuation_loglikelihood, cut  # noqa: E402
from test_run_loop import cells_of, start_cli, wait_for_batches, write_items  # noqa: E402

CLOZE = {"cloze_qa", "cloze_bare"}


@pytest.fixture(scope="module")
def weights(tiny_folder):
    """The tiny model as the server loads it from its folder (the same weights a local
    run of tiny_folder reads)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return (AutoModelForCausalLM.from_pretrained(tiny_folder).eval(),
            AutoTokenizer.from_pretrained(tiny_folder))


def served_spec(server, items, grid="g", model=None, **kw) -> RunSpec:
    options = {"base_url": server.url, "served_model": server.model_id, "concurrency": 3,
               "endpoint": "completions", **kw.pop("options", {})}
    kw.setdefault("prompt_mode", "chat" if model else "auto")
    return RunSpec(models=[str(model)] if model else [], items=[str(items)], grid=grid,
                   per_benchmark=None, threads=1, batch_size=2, backend="openai",
                   server=options, **kw)


def execute(spec, store, tmp_path) -> Run:
    run = Run(spec, store, events_path=str(tmp_path / f"{spec.grid}-events.jsonl"),
              display="none")
    run.execute()
    return run


def by_model(cells: dict, model: str) -> dict:
    return {key[1:]: value for key, value in cells.items() if key[0] == model}


def test_served_cells_equal_the_transformers_backend(weights, tiny_folder, tmp_path):
    items = write_items(tmp_path / "items.jsonl", 3)
    store = Store(tmp_path / "s.duckdb")
    with FakeOpenAI(*weights) as server:
        run = execute(served_spec(server, items, model=tiny_folder, name="served"), store,
                      tmp_path)
    execute(RunSpec(models=[str(tiny_folder)], items=[str(items)], grid="g",
                    per_benchmark=None, threads=1, batch_size=2, prompt_mode="chat"),
            store, tmp_path)
    cells = cells_of(store, "g")
    served, local = by_model(cells, "served"), by_model(cells, "tiny-llama")
    assert len(served) == len(local) == 3 * 26
    for key, (correct, pred, perm, raw, scores) in served.items():
        # the answer text is re-encoded with the local tokenizer and cut where transformers
        # stops, so even raw_output agrees
        assert (correct, pred, perm, raw) == local[key][:4], key
        if scores is not None:
            assert scores == pytest.approx(local[key][4], abs=1e-4), key
    assert 1 < server.max_in_flight <= 3  # bounded concurrency, and used
    record = store.get_run(run.run_id)
    prov = record.provenance["models"]["served"]
    assert prov["backend"]["system_fingerprint"] == SYSTEM_FINGERPRINT
    assert prov["echo_probe"] and not prov["refused_configs"]
    fingerprint = prov["fingerprint"]
    assert fingerprint["backend"] == "openai" and fingerprint["served_model"] == "tiny-served"
    assert fingerprint["endpoint_host"] == server.url.split("/")[2]
    assert fingerprint["system_fingerprint"] == SYSTEM_FINGERPRINT
    # tokens and seconds per cell are the server's usage and the request's time
    with store.connect() as con:
        tokens, ms = con.execute("SELECT min(tokens), min(ms) FROM cells WHERE model = "
                                 "'served'").fetchone()
    assert tokens > 0 and ms > 0


def test_a_served_model_is_refused_into_the_local_models_name(weights, tiny_folder,
                                                              tmp_path):
    items = write_items(tmp_path / "items.jsonl", 1)
    store = Store(tmp_path / "s.duckdb")
    execute(RunSpec(models=[str(tiny_folder)], items=[str(items)], grid="g",
                    per_benchmark=None, threads=1, configs=["o0.letter"], prompt_mode="chat"),
            store, tmp_path)
    with FakeOpenAI(*weights) as server:
        with pytest.raises(FingerprintMismatch, match="backend"):
            Run(served_spec(server, items, model=tiny_folder, configs=["o0.letter"]), store)
        # without --model the grid name is the served id; with --name whatever it is given
        execute(served_spec(server, items, configs=["o0.letter"]), store, tmp_path)
    assert {key[0] for key in cells_of(store, "g")} == {"tiny-llama", "tiny-served"}


@pytest.mark.parametrize("behaviour, reason", [
    ({"echo": "shifted"}, "echo log-probabilities disagree with its own generation"),
    ({"echo": "none"}, "returns no prompt log-probabilities"),
])
def test_cloze_configs_are_refused_by_name_and_the_other_24_run(weights, tmp_path, behaviour,
                                                                reason):
    items = write_items(tmp_path / "items.jsonl", 2)
    store = Store(tmp_path / "s.duckdb")
    with FakeOpenAI(*weights, **behaviour) as server:
        run = execute(served_spec(server, items), store, tmp_path)
    cells = cells_of(store, "g")
    assert len(cells) == 2 * 24 and not CLOZE & {key[2] for key in cells}
    record = store.get_run(run.run_id)
    assert record.status == "finished" and record.cells_total == 2 * 24
    [event] = [json.loads(line) for line in open(run.events_path)
               if '"configs_refused"' in line]
    assert event["configs"] == ["cloze_bare", "cloze_qa"]
    assert "cloze_bare, cloze_qa refused" in event["reason"] and reason in event["reason"]
    refused = record.provenance["models"]["tiny-served"]["refused_configs"]
    assert set(refused) == CLOZE and reason in refused["cloze_qa"]
    card = provenance_card(record.to_dict())  # what `runs show` prints
    assert f"served           tiny-served at {server.url.split('/')[2]}, /v1/completions" in card
    assert "refused          cloze_qa: " in card and "from /v1/completions echo log-probabilities" in card


def test_a_chat_only_server_runs_the_generation_configs(weights, tmp_path):
    items = write_items(tmp_path / "items.jsonl", 2)
    store = Store(tmp_path / "s.duckdb")
    with FakeOpenAI(*weights, completions=False) as server:
        run = execute(served_spec(server, items, options={"endpoint": "chat"}), store,
                      tmp_path)
    assert {p for p, _, _ in server.requests if p.endswith("chat/completions")}
    assert len(cells_of(store, "g")) == 2 * 24
    prov = store.get_run(run.run_id).provenance["models"]["tiny-served"]
    assert "server's chat template" in prov["template"]
    assert "no prompt log-probabilities" in prov["refused_configs"]["cloze_qa"]


def test_429_5xx_and_timeouts_are_retried(weights, tmp_path):
    with FakeOpenAI(*weights, fail_first=2, fail_status=429) as server:
        client = OpenAIClient(server.url, backoff=0.01)
        assert client.post("completions", {"model": "m", "prompt": "The", "max_tokens": 1})
        assert client.retried == 2
    with FakeOpenAI(*weights, fail_first=1, fail_status=503) as server:
        client = OpenAIClient(server.url, backoff=0.01)
        assert client.post("completions", {"model": "m", "prompt": "The", "max_tokens": 1})
        assert client.retried == 1
    with FakeOpenAI(*weights, stall_first=1, stall_s=1.5) as server:
        client = OpenAIClient(server.url, backoff=0.01, timeout=0.5)
        assert client.post("completions", {"model": "m", "prompt": "The", "max_tokens": 1})
        assert client.retried == 1
    with FakeOpenAI(*weights, fail_first=99, fail_status=503) as server:
        client = OpenAIClient(server.url, backoff=0.0, retries=2)
        with pytest.raises(ServerError, match="HTTP 503"):
            client.post("completions", {"model": "m", "prompt": "The"})
        assert server.posts == 3  # the first try and two retries, no more


def test_a_run_survives_a_busy_server(weights, tmp_path):
    items = write_items(tmp_path / "items.jsonl", 1)
    with FakeOpenAI(*weights, fail_every=3, fail_status=429) as server:
        execute(served_spec(server, items, configs=list(parse_config_list("generate"))), Store(tmp_path / "s.duckdb"),
                tmp_path)
    assert server.failed >= 8  # a third of the 25 requests were turned away once
    assert len(cells_of(Store(tmp_path / "s.duckdb"), "g")) == 24


def test_bad_server_settings_are_clear_errors(weights, tmp_path):
    items = write_items(tmp_path / "items.jsonl", 1)
    store = Store(tmp_path / "s.duckdb")
    with FakeOpenAI(*weights) as server:
        with pytest.raises(InputError, match="does not serve 'other'.*tiny-served"):
            Run(served_spec(server, items, options={"served_model": "other"}), store)
        with pytest.raises(InputError, match="give --model"):
            Run(served_spec(server, items, prompt_mode="chat"), store)
        with pytest.raises(InputError, match="NO_SUCH_KEY_VAR, which is not set"):
            Run(served_spec(server, items, options={"api_key_env": "NO_SUCH_KEY_VAR"}), store)
    with pytest.raises(InputError, match="must not carry credentials"):
        endpoint_root("http://user:secret@127.0.0.1:1/v1")
    assert not store.runs()  # nothing was recorded


def test_shards_together_make_the_whole_grid(weights, tmp_path):
    items = write_items(tmp_path / "items.jsonl", 4)
    whole, parts = Store(tmp_path / "whole.duckdb"), Store(tmp_path / "parts.duckdb")
    with FakeOpenAI(*weights) as server:
        execute(served_spec(server, items), whole, tmp_path)
        for index in range(2):
            execute(served_spec(server, items, shard=[index, 2]), parts, tmp_path)
    assert cells_of(parts, "g") == cells_of(whole, "g")


def _cli_args(server, items, db, events, grid="g"):
    return ["run", "--backend", "openai", "--base-url", server.url, "--served-model",
            server.model_id, "--api-key-env", "PLANTED_TEST_KEY", "--concurrency", "2",
            "--items", str(items), "--per-benchmark", "0", "--grid", grid,
            "--batch-size", "1", "--threads", "1", "--events", str(events), "--db", str(db),
            "--display", "plain"]


def test_kill_9_then_resume_gives_the_uninterrupted_grid_and_the_key_is_nowhere(
        weights, tmp_path):
    key = "sk-planted-" + os.urandom(12).hex()
    env = {"PLANTED_TEST_KEY": key}
    items = write_items(tmp_path / "items.jsonl", 6)
    os.environ["PLANTED_TEST_KEY"] = key  # for start_cli, which passes os.environ on
    try:
        with FakeOpenAI(*weights, key=key) as server:
            whole = run_cli(*_cli_args(server, items, tmp_path / "whole.duckdb",
                                       tmp_path / "whole.jsonl"), env=env, timeout=600)
            assert whole.returncode == 0, whole.stderr
            killed_events = tmp_path / "killed.jsonl"
            proc = start_cli(*_cli_args(server, items, tmp_path / "killed.duckdb",
                                        killed_events))
            if wait_for_batches(killed_events, 2, proc):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            left = len(cells_of(Store(tmp_path / "killed.duckdb"), "g"))
            assert 0 < left < 6 * 26  # killed mid-run, some batches committed
            again = run_cli(*_cli_args(server, items, tmp_path / "killed.duckdb",
                                       killed_events), env=env, timeout=600)
            assert again.returncode == 0, again.stderr
            exports = [run_cli("export", "--grid", "g", "--what", what, "--format", fmt,
                               "--out", str(tmp_path / f"export-{what}.{fmt}"),
                               db=tmp_path / "whole.duckdb", env=env)
                       for what, fmt in (("cells", "csv"), ("cells", "json"),
                                         ("provenance", "json"))]
            # An error path: a server that quotes the key back in its error message.
            server.error_says = f"bad request from key {key}"
            failed = run_cli(*_cli_args(server, items, tmp_path / "failed.duckdb",
                                        tmp_path / "failed.jsonl"), env=env, timeout=120)
    finally:
        os.environ.pop("PLANTED_TEST_KEY", None)
    assert all(p.returncode == 0 for p in exports), [p.stderr for p in exports]
    assert cells_of(Store(tmp_path / "killed.duckdb"), "g") == \
        cells_of(Store(tmp_path / "whole.duckdb"), "g")
    assert failed.returncode != 0 and "[api key]" in failed.stderr
    sent = [headers.get("Authorization") for _, headers, _ in server.requests]
    assert set(sent) == {f"Bearer {key}"}  # in the header of every request
    assert not any(key in json.dumps(body) for _, _, body in server.requests)
    texts = [p.stdout + p.stderr for p in [whole, again, failed, *exports]]
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "items.jsonl"]
    assert any(p.name.startswith("export-") for p in files) and len(files) >= 6
    leaks = [str(p) for p in files if key.encode() in p.read_bytes()]
    leaks += [f"output {i}" for i, text in enumerate(texts) if key in text]
    assert not leaks, leaks


def test_echo_offsets_select_the_continuation_tokens():
    text = "Answer: Paris"
    answer = {"choices": [{"logprobs": {
        "tokens": ["Answer", ":", " Par", "is", "\n"],
        "token_logprobs": [None, -0.5, -2.0, -0.25, -9.0],
        "text_offset": [0, 6, 7, 11, 13]}}]}
    assert continuation_loglikelihood(answer, text, 7) == (-2.25, 2)
    # a token straddling the boundary counts with the continuation
    assert continuation_loglikelihood(answer, text, 9) == (-2.25, 2)
    answer["choices"][0]["logprobs"]["token_logprobs"][2] = None
    with pytest.raises(ServerError, match="no log-probability for echoed token ' Par'"):
        continuation_loglikelihood(answer, text, 7)


def test_the_cut_keeps_the_text_up_to_the_decision():
    class Request:
        @staticmethod
        def decided(text):
            return text.strip().startswith("B")

    assert cut(Request, " B) because", "length") == (" B", "decided")
    assert cut(Request, " maybe", "stop") == (" maybe", "eos")
    assert cut(Request, " maybe", "length") == (" maybe", "length")


def test_cli_flags_need_the_openai_backend(tmp_path):
    proc = run_cli("run", "--base-url", "http://127.0.0.1:9/v1", "--model", "x", "--grid",
                   "g", db=tmp_path / "s.duckdb")
    assert proc.returncode == 2 and "go with --backend openai" in proc.stderr
    proc = run_cli("run", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                   "--served-model", "m", "--api-key-env", "sk-live-123", "--grid", "g",
                   db=tmp_path / "s.duckdb")
    assert proc.returncode == 2 and "not the key itself" in proc.stderr
    assert "sk-live-123" not in proc.stderr
