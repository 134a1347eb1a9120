"""`fragility-tui compare A B --items SRC` (issue 45) driving the live runner, as a user runs it:
the CLI as a subprocess on two tiny random Llamas with a real tokenizer. Each chunk's cells
go into the grid through ordinary run rows; the decision is read back from the stored cells;
a kill -9 after the first chunk's progress line and a rerun give the uninterrupted run's
decision path; the stopping rule and budgets on live runs; bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cli_process import cli_popen, cli_run  # noqa: E402
from tiny_models import make_model, make_tokenizer  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from test_run_loop import QUESTIONS, cells_of  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIGS = "o0.letter,o1.letter,cloze_qa"
N_ITEMS, CHUNK = 12, 4


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path, Path]:
    """Two tiny models that answer differently (seeds 0 and 1) and 12 items, 2 benchmarks."""
    root = tmp_path_factory.mktemp("compare_live")
    tokenizer = make_tokenizer()
    folders = []
    for seed, name in ((0, "tiny-a"), (1, "tiny-b")):
        make_model(tokenizer, seed=seed).save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        folders.append(root / name)
    rows = []
    for i in range(N_ITEMS):
        q, choices, gold = QUESTIONS[i % len(QUESTIONS)]
        rows.append({"id": f"q{i}", "benchmark": "toy" if i % 2 else "quiz", "subject": None,
                     "question": f"{q} (variant {i})", "choices": choices, "gold": gold})
    items = root / "items.jsonl"
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folders[0], folders[1], items


def _argv(pair, db, *extra) -> list[str]:
    a, b, items = pair
    return ["compare", str(a), str(b), "--items",
            str(items), "--grid", "g", "--chunk", str(CHUNK), "--configs", CONFIGS,
            "--reference", "cloze_qa", "--per-benchmark", "0", "--prompt-mode", "chat",
            "--threads", "1", "--display", "none", "--db", str(db), *extra]


def _env() -> dict:
    return {**os.environ, "NO_COLOR": "1"}


def compare(pair, db, *extra, timeout=300) -> subprocess.CompletedProcess:
    return cli_run(_argv(pair, db, *extra), capture_output=True, text=True,
                   timeout=timeout, cwd=REPO, env=_env())


def _path(out: dict) -> list:
    return [(s["items"], s["delta"], s["lower"], s["upper"]) for s in out["path"]]


def test_kill_9_after_the_first_chunk_then_rerun_follows_the_same_decision_path(pair, tmp_path):
    whole = compare(pair, tmp_path / "whole.duckdb", "--json")
    assert whole.returncode == 0, whole.stderr
    reference = json.loads(whole.stdout)
    assert reference["replay"] is False and reference["stop"] == "pool-exhausted"
    assert [s["items"] for s in reference["path"]] == [4, 8, 12]
    assert reference["items_used"] == N_ITEMS and len(reference["runs"]) == 6
    # the progress lines (stderr with --json) say items done, Δ̂, its sequence, the decision
    progress = [line for line in whole.stderr.splitlines() if "decision:" in line]
    assert len(progress) == 3 and progress[0].split()[0] == "4/12"
    # each model loads once for the whole comparison; its later chunks' runs reuse it
    loads = [e for r in Store(tmp_path / "whole.duckdb").runs("g")
             for e in map(json.loads, Path(r.events_path).read_text().splitlines())
             if e["event"] == "model_loaded"]
    assert sorted((e["model"], e["reused"]) for e in loads) == [
        ("tiny-a", False), ("tiny-a", True), ("tiny-a", True),
        ("tiny-b", False), ("tiny-b", True), ("tiny-b", True)]

    db = tmp_path / "killed.duckdb"
    proc = cli_popen(_argv(pair, db), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                     text=True, cwd=REPO, env=_env())
    try:
        for line in proc.stdout:  # the header, then the first chunk's progress line
            if "decision:" in line:
                break
        else:
            raise AssertionError("no progress line before the comparison ended")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    store = Store(db)
    assert len(cells_of(store, "g")) < N_ITEMS * 3 * 2  # the kill left work to do
    rerun = compare(pair, db, "--json")
    assert rerun.returncode == 0, rerun.stderr
    out = json.loads(rerun.stdout)
    assert _path(out) == _path(reference)
    assert (out["stop"], out["settled"], out["winner"], out["items_used"]) == \
        (reference["stop"], reference["settled"], reference["winner"],
         reference["items_used"])
    assert out["order_items"] == reference["order_items"]
    assert out["pool_delta"] == reference["pool_delta"]
    # the same cells as the uninterrupted run's, once each; the first chunk not redone
    # the rerun loads the models afresh for chunk 2, where the whole run reused them: the
    # cells (scores exactly) do not depend on whether the weights were kept loaded
    store = Store(db)
    assert set(cells_of(store, "g")) == set(cells_of(Store(tmp_path / "whole.duckdb"), "g"))
    with store.connect() as con:
        assert con.execute("SELECT count(*), count(DISTINCT (model, item_uid, config_id)) "
                           "FROM cells").fetchall()[0] == (N_ITEMS * 3 * 2,) * 2
    chunks = [r.spec["compare"]["chunk"] for r in store.runs("g")]
    assert chunks.count(0) == 2 and sorted(set(chunks)) == [0, 1, 2]
    # every chunk's run row carries provenance and says which items it evaluated
    for r in store.runs("g"):
        assert len(r.spec["item_uids"]) == CHUNK and r.spec["compare"]["pair"] == \
            ["tiny-a", "tiny-b"]
    # a third invocation evaluates nothing: the grid holds every cell; same path (a replay)
    again = compare(pair, db, "--json")
    assert _path(json.loads(again.stdout)) == _path(reference)
    assert json.loads(again.stdout)["runs"] == []


def test_settled_on_the_first_chunk_stops_and_says_how_much_was_saved(pair, tmp_path):
    # a 99-point margin on the pool (the largest margin compare takes): after the first
    # chunk no pool mean is that far from zero, so the first chunk settles it
    out = compare(pair, tmp_path / "s.duckdb", "--margin", "99", "--scope", "pool")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("compare tiny-a vs tiny-b on g (live runs over ")
    assert "4/12" in lines[1] and "decision: equivalent" in lines[1]
    assert lines[2] == ("verdict: equivalent within ±99 points on this pool (equivalent: "
                        "settled); 4 of 12 items used, 67% of the pool saved")
    store = Store(tmp_path / "s.duckdb")
    assert len(store.runs("g")) == 2 and len(cells_of(store, "g")) == CHUNK * 3 * 2


@pytest.mark.parametrize("flag, value, budget", [
    ("--max-items", "5", "max-items"),
    ("--max-tokens", "1", "max-tokens"),
    ("--max-seconds", "0.001", "max-seconds"),
])
def test_a_budget_stops_the_live_run(pair, tmp_path, flag, value, budget):
    out = compare(pair, tmp_path / "s.duckdb", flag, value, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["stop"] == "budget" and result["budget"] == budget
    if budget == "max-items":  # chunks of 4 up to 5 items: 4, then the 5th alone
        assert [s["items"] for s in result["path"]] == [4, 5]
    else:  # the first chunk's runs spend it; no second chunk starts
        assert [s["items"] for s in result["path"]] == [4]
        assert result["tokens_used"] >= 1 and result["seconds_used"] > 0
    text = compare(pair, tmp_path / "s.duckdb", flag, value).stdout
    assert f"(budget: the budget (--{budget}) is spent)" in text
    # no verdict: what was used, never a share "saved" (issue 58)
    assert "items used" in text and "saved" not in text


@pytest.mark.parametrize("extra, field", [
    (("--max-seconds", "0"), "--max-seconds"),
    (("--max-tokens", "0"), "--max-tokens"),
    (("--max-items", "0"), "--max-items"),
    (("--chunk", "0"), "--chunk"),
    (("--reference", "o5.digit"), "--reference"),
])
def test_bad_settings_are_one_line_naming_the_field(pair, tmp_path, extra, field):
    out = compare(pair, tmp_path / "s.duckdb", *extra)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and f"field {field!r}" in out.stderr
    assert not (tmp_path / "s.duckdb").exists() or not Store(tmp_path / "s.duckdb").runs()


def test_an_unknown_model_or_an_empty_pool_is_one_line(pair, tmp_path):
    a, b, items = pair
    base = ["compare", "--grid", "g",
            "--db", str(tmp_path / "s.duckdb"), "--display", "none"]

    def run(*args):
        return cli_run([*base, *args], capture_output=True, text=True, timeout=120,
                       cwd=REPO, env=_env())

    out = run(str(a), str(tmp_path / "no-such-model"), "--items", str(items))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "field 'B'" in out.stderr and "no-such-model" in out.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = run(str(a), str(b), "--items", str(empty))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "field '--items'" in out.stderr
    out = run(str(a), str(b), "--max-seconds", "10")  # a replay has no live budget
    assert out.returncode == 2 and "field '--max-seconds'" in out.stderr


# -- issue 58: run's checks, resumption, honest seconds, compare's own flag names ----------

BIG = str(2 ** 70)


@pytest.mark.parametrize("command, extra, field", [
    ("compare", ("--max-new-tokens", "0"), "--max-new-tokens"),
    ("compare", ("--threads", "0"), "--threads"),
    ("compare", ("--seed", "-1"), "--seed"),
    ("compare", ("--margin", "nan"), "--margin"),
    ("compare", ("--margin", "inf"), "--margin"),
    ("compare", ("--margin", "100"), "--margin"),
    ("compare", ("--grid-seed", BIG), "--grid-seed"),
    ("run", ("--max-new-tokens", "0"), "--max-new-tokens"),
    ("run", ("--threads", "0"), "--threads"),
    ("run", ("--seed", BIG), "--seed"),
])
def test_a_bad_flag_is_one_error_line_and_no_run_row(pair, tmp_path, command, extra, field):
    a, b, items = pair
    db = tmp_path / "s.duckdb"
    if command == "compare":
        out = compare(pair, db, *extra)
    else:
        out = cli_run(["run", "--model", str(a), "--items", str(items), "--grid", "g",
                       "--configs", CONFIGS, "--display", "none", "--db", str(db), *extra],
                      capture_output=True, text=True, timeout=300, cwd=REPO, env=_env())
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1
    assert f"field {field!r}" in out.stderr
    assert not db.exists() or not Store(db).runs()


def _hold_cpu_slot(db: Path):
    """The CPU's one slot (FRAGILITY_CPU_SLOTS=1), held by this test: a run queues."""
    import fcntl

    folder = db.with_name(db.name + ".slots")
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / "cpu-0.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _wait_queued(db: Path, proc) -> None:
    import time

    for _ in range(1200):
        if proc.poll() is not None:
            raise AssertionError(f"compare ended first: {proc.returncode}")
        if db.exists():
            try:
                if any(r.status == "queued" and r.note for r in Store(db).runs()):
                    return
            except Exception:  # the file being created or locked: look again
                pass
        time.sleep(0.1)
    raise AssertionError("no queued run")


def test_a_runs_seconds_leave_out_the_time_it_waited_queued(pair, tmp_path):
    import time

    db = tmp_path / "q.duckdb"
    fd = _hold_cpu_slot(db)
    proc = cli_popen(_argv(pair, db, "--max-items", "4", "--device", "cpu"),
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                     cwd=REPO, env={**_env(), "FRAGILITY_CPU_SLOTS": "1"})
    try:
        _wait_queued(db, proc)
        time.sleep(2)  # queued: not work (counted, it alone would break the bound below)
    finally:
        released = time.monotonic()
        os.close(fd)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    ended = time.monotonic()
    runs = Store(db).runs("g")
    assert len(runs) == 2
    # both runs worked after the slot came free: their seconds fit in that time
    assert sum(r.seconds for r in runs) <= ended - released + 0.5, \
        [(r.model, r.seconds) for r in runs]


def test_a_rerun_with_other_settings_after_a_kill_starts_a_new_run(pair, tmp_path):
    from fragility_tui.items.item import item_set_hash
    from fragility_tui.items.loaders import load_many

    db = tmp_path / "k.duckdb"
    # the grid exists (an earlier run made it), so the died run is found for the rerun
    Store(db).create_grid("g", seed=0, item_set_hash=item_set_hash(
        load_many([str(pair[2])], per_benchmark=None, seed=0)[0]))
    fd = _hold_cpu_slot(db)
    proc = cli_popen(_argv(pair, db, "--device", "cpu"), stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, cwd=REPO,
                     env={**_env(), "FRAGILITY_CPU_SLOTS": "1"})
    try:
        _wait_queued(db, proc)  # chunk 1's run of tiny-a, recorded with three configs
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        os.close(fd)
    (died,) = Store(db).runs("g")
    assert died.spec["configs"] == CONFIGS.split(",")
    # the rerun asks for other configs: the died run (its old spec) is not resumed
    out = compare(pair, db, "--device", "cpu", "--configs", "o0.letter,cloze_qa",
                  "--max-items", "4", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["stop"] == "budget" and result["items_used"] == 4
    assert died.run_id not in result["runs"] and len(result["runs"]) == 2
    store = Store(db)
    assert store.get_run(died.run_id).spec == died.spec  # left as it died
    assert all(store.get_run(r).spec["configs"] == ["o0.letter", "cloze_qa"]
               for r in result["runs"])


def test_refusals_name_only_compares_flags(pair, tmp_path):
    from fragility_tui.items.loaders import load_many

    from fragility_tui.items.item import item_set_hash

    _, _, items = pair
    loaded, _ = load_many([str(items)], per_benchmark=None, seed=0)
    seeded = Store(tmp_path / "seed.duckdb")
    seeded.create_grid("g", seed=7, item_set_hash=item_set_hash(loaded))
    out = compare(pair, seeded.path, "--grid-seed", "0")
    assert out.returncode == 2 and "field '--grid-seed'" in out.stderr
    assert "use --grid-seed 7" in out.stderr
    assert "--seed" not in out.stderr.replace("--grid-seed", "")
    other = Store(tmp_path / "items.duckdb")
    other.create_grid("g", seed=0, item_set_hash="0" * 64)
    out = compare(pair, other.path)
    assert out.returncode == 2 and "another item set" in out.stderr
    assert "--add-items" not in out.stderr and "use another --grid" in out.stderr
    # a model evaluated into the grid with other settings: compare has no --name
    fingered = Store(tmp_path / "fp.duckdb")
    fingered.create_grid("g", seed=0, item_set_hash=item_set_hash(loaded))
    fingered.record_model("g", "tiny-a", fingerprint={"max_new_tokens": 3}, source=None,
                          revision=None, dtype=None, quantization=None, base_model=None,
                          provenance={})
    out = compare(pair, fingered.path)
    assert out.returncode == 2 and "other settings" in out.stderr, out.stderr
    assert "--name" not in out.stderr and "another --grid" in out.stderr
