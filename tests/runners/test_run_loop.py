"""The run loop and CLI on a tiny random Llama saved to a temp folder: cells and provenance
in the store, resume after a simulated crash, SIGKILL at random moments, cancel, errors."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.errors import InputError  # noqa: E402
from fragility_tui.harness.configs import CONFIG_IDS  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from fragility_tui.processes import effective_status  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402
from helpers import pause_outside_the_store, run_cli  # noqa: E402
from cli_process import cli_popen, cli_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

QUESTIONS = [
    ("Which gas do plants absorb from the air?", ["oxygen", "nitrogen", "carbon dioxide", "helium"], 2),
    ("What is the capital of France?", ["Paris", "Rome", "Berlin", "Madrid"], 0),
    ("Which planet is the largest?", ["Mars", "Venus", "Jupiter", "Earth"], 2),
    ("Water boils at sea level at how many degrees Celsius?", ["90", "100", "110", "120"], 1),
    ("A man is sitting on a roof. He", ["starts pulling up roofing.", "sings.",
                                       "holds a rope.", "jumps into water."], 0),
    ("Which of these is a mammal?", ["shark", "trout", "whale", "squid"], 2),
]


def write_items(path: Path, n: int) -> Path:
    rows = []
    for i in range(n):
        q, choices, gold = QUESTIONS[i % len(QUESTIONS)]
        rows.append({"id": f"q{i}", "benchmark": "toy", "subject": None,
                     "question": f"{q} (variant {i})", "choices": choices, "gold": gold})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def spec_for(folder, items, grid="g", **kw) -> RunSpec:
    kw.setdefault("prompt_mode", "chat")  # "tiny-llama" names no instruct model
    return RunSpec(models=[str(folder)], items=[str(items)], grid=grid, per_benchmark=None,
                   threads=1, batch_size=2, **kw)


def cells_of(store: Store, grid: str) -> dict:
    with store.connect() as con:
        rows = con.execute("SELECT model, item_uid, config_id, correct, pred, permutation, "
                           "raw_output, scores FROM cells WHERE grid = ?", [grid]).fetchall()
    return {r[:3]: r[3:] for r in rows}


def assert_same_cells(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        correct, pred, perm, raw, scores = a[key]
        assert (correct, pred, perm, raw) == b[key][:4], key
        if scores is not None:
            assert scores == pytest.approx(b[key][4], abs=1e-4)


def model_sdpa_kernels_absent_on_cpu(prov) -> bool:
    """The CUDA-only record of SDPA kernels (configure_device) is null on a CPU run."""
    return all(model.get("sdpa_kernels") is None for model in prov["models"].values())


def test_run_writes_every_cell_with_provenance(tiny_folder, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "items.jsonl", 3)
    run = Run(spec_for(tiny_folder, items), store, display="none",
              events_path=str(tmp_path / "ev.jsonl"))
    assert run.execute() == "finished"
    cells = cells_of(store, "g")
    assert len(cells) == 3 * 26
    assert {k[2] for k in cells} == set(CONFIG_IDS)
    row = store.get_run(run.run_id)
    assert row.status == "finished" and row.cells_done == row.cells_total == 78
    prov = row.provenance
    assert prov["schema"] == 1  # fragility_tui/schemas/provenance.py's PROVENANCE_SCHEMA
    assert model_sdpa_kernels_absent_on_cpu(prov)
    for key in ("spec_version", "parser_version", "max_new_tokens", "item_set_hash", "seed",
                "libraries", "device"):
        assert prov[key] is not None, key
    assert prov["fragility_tui"]["version"]
    assert len((prov["fragility_tui"]["git"] or "x" * 40).split("-")[0]) == 40  # sha, or no git
    model = prov["models"]["tiny-llama"]
    assert len(model["weights_sha256"]) == 64 and model["chat_template_sha256"]
    import hashlib  # the template's text too, so the app renders what the model saw

    assert hashlib.sha256(model["chat_template"].encode()).hexdigest() == \
        model["chat_template_sha256"]
    assert isinstance(model["chat_template_tokens"], dict)
    from fragility_tui.harness.chat import ChatTemplate  # what the item drill-down reads

    row_chat = ChatTemplate.from_provenance(store.list_models("g")[0]["provenance"])
    assert row_chat.mode == "chat" and row_chat.verified
    assert model["add_bos"] is False and model["prompt_mode"] == "chat template"
    assert model["attn_implementation"] == "sdpa" and model["device_map"] is None
    batching = prov["batching"]["tiny-llama"]  # the effective batch sizes
    assert batching["batches"] == 2 and batching["items_per_batch"]["max"] == 2  # --batch-size 2
    assert "tree attention mask" in batching["layout"] and batching["oom_retries"] == 0
    assert row.tokens > 0 and row.seconds > 0
    events = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "started" and kinds[-1] == "finished" and "batch" in kinds
    assert [m["model"] for m in store.list_models("g")] == ["tiny-llama"]


def test_a_quantised_run_is_listed_under_its_grid_model_name(tiny_folder, tmp_path):
    """`runs list` shows NAME+int8 (the grid's model), linked to its base, with the scheme
    and how it was executed in provenance."""
    pytest.importorskip("optimum.quanto")
    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "items.jsonl", 1)
    run = Run(spec_for(tiny_folder, items, quantize="int8"), store, display="none",
              events_path=str(tmp_path / "ev.jsonl"))
    assert run.execute() == "finished"
    assert store.get_run(run.run_id).model == "tiny-llama+int8"
    model = store.list_models("g")[0]
    assert (model["model"], model["base_model"]) == ("tiny-llama+int8", "tiny-llama")
    quantization = model["provenance"]["quantization"]
    assert quantization["weights"] == "qint8" and "de-quantised once" in quantization["execution"]
    assert len(cells_of(store, "g")) == 26
    from fragility_tui.provenance import provenance_card

    card = provenance_card(store.get_run(run.run_id).to_dict())
    assert "executed as      quantised weights de-quantised once" in card
    assert "fragility-tui    0." in card


def test_resume_after_a_crash_gives_the_uninterrupted_grid(tiny_folder, tmp_path, monkeypatch):
    items = write_items(tmp_path / "items.jsonl", 5)
    reference = Store(tmp_path / "ref.duckdb")
    Run(spec_for(tiny_folder, items), reference, display="none",
        events_path=str(tmp_path / "ref.jsonl")).execute()

    store = Store(tmp_path / "s.duckdb")
    calls = {"n": 0}
    original = Run.score_chunk

    def crash_on_third(self, *args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated crash")
        return original(self, *args)

    monkeypatch.setattr(Run, "score_chunk", crash_on_third)
    run = Run(spec_for(tiny_folder, items), store, display="none",
              events_path=str(tmp_path / "ev.jsonl"))
    with pytest.raises(RuntimeError):
        run.execute()
    failed = store.get_run(run.run_id)
    assert failed.status == "failed" and "simulated crash" in failed.error
    assert len(cells_of(store, "g")) == 2 * 2 * 26  # two committed batches of two items
    monkeypatch.setattr(Run, "score_chunk", original)

    spec = RunSpec.from_dict(failed.spec)
    resumed = Run(spec, store, run_id=run.run_id, display="none")
    assert resumed.execute() == "finished"
    assert_same_cells(cells_of(store, "g"), cells_of(reference, "g"))
    assert store.get_run(run.run_id).cells_done == 5 * 26


def test_a_full_disk_fails_the_run_without_a_half_written_batch(tiny_folder, tmp_path,
                                                                monkeypatch):
    """ENOSPC while a batch is being inserted: that batch's transaction rolls back, the run
    is `failed` with a reason saying the disk is full, and a resume completes the grid."""
    import errno

    items = write_items(tmp_path / "items.jsonl", 4)
    store = Store(tmp_path / "s.duckdb")
    original = Store.write_cell_table
    calls = {"n": 0}

    def fill_the_disk_on_second_batch(table, con):
        written = original(table, con)  # the rows are in, inside the open transaction
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return written

    monkeypatch.setattr(Store, "write_cell_table", staticmethod(fill_the_disk_on_second_batch))
    run = Run(spec_for(tiny_folder, items), store, display="none",
              events_path=str(tmp_path / "ev.jsonl"))
    with pytest.raises(OSError):
        run.execute()
    row = store.get_run(run.run_id)
    assert row.status == "failed" and row.error.startswith("disk full")
    assert len(cells_of(store, "g")) == 2 * 26 == row.cells_done  # the first batch only
    event = json.loads((tmp_path / "ev.jsonl").read_text().splitlines()[-1])
    assert event["event"] == "failed" and event["reason"].startswith("disk full")

    monkeypatch.setattr(Store, "write_cell_table", staticmethod(original))
    resumed = Run(RunSpec.from_dict(row.spec), store, run_id=run.run_id, display="none")
    assert resumed.execute() == "finished"
    assert len(cells_of(store, "g")) == 4 * 26


def test_seed_mismatch_with_an_existing_grid_is_refused(tiny_folder, tmp_path):
    store = Store(tmp_path / "s.duckdb")
    items = write_items(tmp_path / "items.jsonl", 1)
    Run(spec_for(tiny_folder, items, configs=["cloze_qa"]), store, display="none",
        events_path=str(tmp_path / "a.jsonl")).execute()
    with pytest.raises(InputError, match="seed 0"):  # before the run row is written
        Run(spec_for(tiny_folder, items, configs=["cloze_qa"], seed=5), store,
            display="none", events_path=str(tmp_path / "b.jsonl"))
    assert len(store.runs()) == 1


# -- the CLI as a user runs it ----------------------------------------------------------------

def cli(*args, timeout=300, **kw):
    return cli_run(args, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                   env={**os.environ, "NO_COLOR": "1"}, **kw)


def start_cli(*args, stdout=None):
    return cli_popen(args, cwd=REPO, stdout=stdout or subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"})


def wait_for_batches(events: Path, n: int, proc, timeout=120) -> bool:
    """Wait until the log has `n` more batch events than at the start (False if it exited)."""
    deadline = time.monotonic() + timeout
    def batches():
        if not events.exists():
            return 0
        return events.read_text().count('"event": "batch"')
    start = batches()
    while time.monotonic() < deadline:
        if batches() >= start + n:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    raise AssertionError("no progress")


@pytest.mark.starts_first
def test_sigkill_at_three_random_moments_then_resume(tiny_folder, tmp_path):
    # 20 one-item batches: three kills (each after at most 2 batches plus a fraction of the
    # next) always leave work, so no kill can land after the run marked itself finished.
    n_items = 20
    items = write_items(tmp_path / "items.jsonl", n_items)
    common = ["--model", str(tiny_folder), "--items", str(items), "--per-benchmark", "0",
              "--batch-size", "1", "--threads", "1", "--display", "none"]
    # the uninterrupted run, in this process (the killed run below goes through the CLI):
    # the spec `run` makes of `common`, without a process that imports torch again
    ref = Store(tmp_path / "ref.duckdb")
    assert Run(RunSpec(models=[str(tiny_folder)], items=[str(items)], grid="g",
                       per_benchmark=None, batch_size=1, threads=1), ref, display="none",
               events_path=str(tmp_path / "ref.jsonl")).execute() == "finished"
    reference = cells_of(ref, "g")
    assert len(reference) == n_items * 26

    db, events = tmp_path / "s.duckdb", tmp_path / "ev.jsonl"
    rng = random.Random(7)
    proc = start_cli("run", *common, "--grid", "g", "--db", str(db), "--events", str(events))
    run_id = None
    for kill in range(3):
        # A random moment: after 1-2 more committed batches, plus up to 50 ms into the next.
        alive = wait_for_batches(events, rng.randint(1, 2), proc)
        time.sleep(rng.uniform(0, 0.05))
        assert alive and proc.poll() is None, "the run finished before kill %d" % kill
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = Store(db)
        run_id = run_id or store.runs()[0].run_id
        assert effective_status(store.get_run(run_id)) == "died"
        assert len(cells_of(store, "g")) < n_items * 26
        proc = start_cli("run", "--resume", run_id, "--db", str(db), "--display", "none",
                         "--threads", "1")
    assert proc.wait(timeout=300) == 0
    store = Store(db)
    assert_same_cells(cells_of(store, "g"), reference)
    with store.connect() as con:  # no duplicate: one row per key
        assert con.execute("SELECT count(*), count(DISTINCT (model, item_uid, config_id)) "
                           "FROM cells").fetchall()[0] == (n_items * 26, n_items * 26)
    assert store.get_run(run_id).status == "finished"
    assert len(store.runs()) == 1  # resumes continue the same run


def test_cancel_stops_after_the_current_batch(tiny_folder, tmp_path):
    items = write_items(tmp_path / "items.jsonl", 8)
    db, events = tmp_path / "s.duckdb", tmp_path / "ev.jsonl"
    proc = start_cli("run", "--model", str(tiny_folder), "--items", str(items), "--grid", "g",
                     "--per-benchmark", "0", "--batch-size", "1", "--threads", "1",
                     "--display", "none", "--db", str(db), "--events", str(events))
    assert wait_for_batches(events, 1, proc)
    # Paused while the cancel is sent: a fast machine would otherwise finish all 8 batches.
    pause_outside_the_store(proc.pid, db)
    try:
        run_id = Store(db).runs()[0].run_id
        out = cli("runs", "cancel", run_id, "--db", str(db))
    finally:
        proc.send_signal(signal.SIGCONT)
    assert out.returncode == 0 and "cancelling" in out.stdout
    assert proc.wait(timeout=120) == 130
    store = Store(db)
    row = store.get_run(run_id)
    assert row.status == "cancelled"
    assert 0 < len(cells_of(store, "g")) < 8 * 26
    assert row.cells_done == len(cells_of(store, "g"))  # the last batch was committed
    assert json.loads(events.read_text().splitlines()[-1])["event"] == "cancelled"
    listing = cli("runs", "list", "--db", str(db))
    assert run_id in listing.stdout and "cancelled" in listing.stdout
    card = cli("runs", "show", run_id, "--db", str(db))
    assert card.returncode == 0
    assert card.stdout.index("Scoring") < card.stdout.index("Model tiny-llama")


@pytest.mark.parametrize("args, message", [
    (["--model", "no/such/thing/here"], "not found"),
    (["--model", "missing-file.gguf"], "no such GGUF file"),
    (["--model", "smollm2-135m-instruct", "--batch-tokens", "lots"],
     "--batch-tokens must be a positive integer or auto, got 'lots'"),
    (["--model", "smollm2-135m-instruct", "--batch-size", "0"], "--batch-size must be at least 1"),
])
def test_bad_model_specs_fail_with_one_line(tmp_path, args, message):
    items = write_items(tmp_path / "items.jsonl", 1)
    out = cli("run", *args, "--items", str(items), "--grid", "g", "--db",
              str(tmp_path / "s.duckdb"), "--display", "none")
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_unreadable_items_are_refused_before_a_run_row(tiny_folder, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "question": "q"\n')
    db = tmp_path / "s.duckdb"
    out = cli("run", "--model", str(tiny_folder), "--items", str(bad), "--grid", "g",
              "--db", str(db), "--display", "none")
    assert out.returncode == 2 and out.stderr.startswith("error: ") and "bad.jsonl" in out.stderr
    assert Store(db).runs() == []  # issue 24: no failed row for a grid never made


def test_model_needing_remote_code_is_refused(tmp_path, tiny_folder):
    import shutil

    folder = tmp_path / "remote"
    shutil.copytree(tiny_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_x.XForCausalLM"}
    config["model_type"] = "x-custom"
    (folder / "config.json").write_text(json.dumps(config))
    from runners.models.prepare import load_spec as load_model

    with pytest.raises(InputError, match="trust-remote-code"):
        load_model(str(folder))


def test_out_of_memory_halves_the_batch_grows_back_then_fails_clearly(tiny_folder, tmp_path,
                                                                       monkeypatch):
    from runners.run.failure import RunFailed

    items = write_items(tmp_path / "items.jsonl", 8)
    original = Run.score_chunk
    calls = []

    def oom_once(self, loaded, scorer, chunk, max_slots):
        calls.append((len(chunk), max_slots))
        if len(calls) == 1:
            scorer.scratch.take(("pool", 0, 0), (4, 2), torch.zeros(1))
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        if len(calls) == 2:  # the memory kept at the failed size was let go
            assert scorer.scratch.nbytes() == 0
        return original(self, loaded, scorer, chunk, max_slots)

    monkeypatch.setattr(Run, "score_chunk", oom_once)
    store = Store(tmp_path / "s.duckdb")
    events = tmp_path / "ev.jsonl"
    run = Run(spec_for(tiny_folder, items, configs=["o0.letter", "cloze_qa"]), store,
              display="none", events_path=str(events))
    assert run.execute() == "finished"
    ceiling = calls[0][1]
    # Halved (items and tokens), then after two good batches grown back, but never to the
    # budget that ran out of memory: three quarters of it.
    regrown = ceiling * 3 // 4
    assert calls == [(2, ceiling), (1, ceiling // 2), (1, ceiling // 2),
                     (2, regrown), (2, regrown), (2, regrown)]
    assert len(cells_of(store, "g")) == 8 * 2
    assert '"oom_retry"' in events.read_text()
    record = store.get_run(run.run_id).provenance["batching"]["tiny-llama"]
    assert record["oom_retries"] == 1 and record["token_budget"] == ceiling
    assert record["failed_budget"] == ceiling
    assert record["budgets_used"] == {str(ceiling // 2): 2, str(regrown): 3}
    allocator = store.get_run(run.run_id).provenance["cuda_allocator"]
    assert allocator["variable"] in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
    assert record["items_per_batch"] == {"min": 1, "max": 2, "mean": 1.6}

    def always_oom(self, loaded, scorer, chunk, max_slots):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(Run, "score_chunk", always_oom)
    run = Run(spec_for(tiny_folder, items, grid="h", configs=["cloze_qa"]), store,
              display="none", events_path=str(tmp_path / "ev2.jsonl"))
    with pytest.raises(RunFailed, match="out of memory"):
        run.execute()
    assert store.get_run(run.run_id).status == "failed"


def test_hub_id_offline_is_a_clear_error(tmp_path):
    items = write_items(tmp_path / "items.jsonl", 1)
    out = subprocess.run(
        [sys.executable, "-m", "fragility_tui.cli", "run", "--model", "someorg/somemodel@main",
         "--items", str(items), "--grid", "g", "--db", str(tmp_path / "s.duckdb"),
         "--display", "none"], capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: ") and "someorg/somemodel" in out.stderr
    assert "offline" in out.stderr


def test_shards_split_the_items_and_together_make_the_whole_grid(tiny_folder, tmp_path):
    """`run --shard i/n`: each worker takes the items whose id hashes to its shard (after
    sampling), so n shards written into one grid hold exactly the cells of one whole run."""
    from fragility_tui.items.item import parse_shard, shard_of

    items = write_items(tmp_path / "items.jsonl", 6)
    configs = ["o0.letter", "cloze_qa"]
    whole = Store(tmp_path / "whole.duckdb")
    assert Run(spec_for(tiny_folder, items, configs=configs), whole,
               display="none").execute() == "finished"
    sharded = Store(tmp_path / "sharded.duckdb")
    per_shard = []
    for i in range(3):
        run = Run(spec_for(tiny_folder, items, configs=configs, shard=[i, 3]), sharded,
                  display="none")
        assert run.execute() == "finished"
        row = sharded.get_run(run.run_id)
        assert row.spec["shard"] == [i, 3]
        per_shard.append({k[1] for k in cells_of(sharded, "g")} - set().union(*per_shard))
    assert all(shard_of(uid, 3) == i for i, uids in enumerate(per_shard) for uid in uids)
    assert_same_cells(cells_of(sharded, "g"), cells_of(whole, "g"))
    assert sharded.grid_info("g").complete
    assert parse_shard("2/3") == (2, 3)
    for bad in ("3/3", "-1/3", "1", "a/b", "0/0"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def test_a_bad_shard_is_refused_by_the_cli(tmp_path):
    proc = run_cli("run", "--model", "smollm2-135m-instruct", "--shard", "4/4", "--grid", "g",
                   db=tmp_path / "s.duckdb")
    assert proc.returncode == 2 and "--shard" in proc.stderr and "0 <= I < N" in proc.stderr


def test_a_folder_mixing_splits_is_said_and_recorded(tiny_folder, tmp_path):
    """Issue 24 (11): `--items FOLDER` whose files hold one benchmark's test and validation
    splits warns on stderr naming them, and the run card lists the files."""
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    for split, first in (("test", 0), ("validation", 10)):
        rows = [{"id": f"q{first + i}", "benchmark": "arc_easy", "question": q,
                 "choices": c, "gold": g} for i, (q, c, g) in enumerate(QUESTIONS[:2])]
        (folder / f"arc_easy_{split}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "s.duckdb"
    out = cli("run", "--model", str(tiny_folder), "--items", str(folder), "--grid", "g",
              "--configs", "cloze_qa", "--prompt-mode", "chat", "--db", str(db),
              "--display", "none")
    assert out.returncode == 0, out.stderr
    assert ("warning: benchmarks: arc_easy is read from 2 files, which mixes splits: "
            "arc_easy_test.jsonl (test), arc_easy_validation.jsonl (validation)") in out.stderr
    run_id = Store(db).runs()[0].run_id
    card = cli("runs", "show", run_id, "--db", str(db)).stdout
    assert "4 items from benchmarks" in card
    assert "files            arc_easy_test.jsonl (test), arc_easy_validation.jsonl" in card
    assert "warning: benchmarks: arc_easy is read from 2 files, which mixes splits" in card
