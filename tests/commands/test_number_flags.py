"""Numeric flags of every command (commands/flag_checks.py): a negative, non-finite or absurdly
large value is one `error:` line naming the flag, the value and what is accepted, exit 2,
before the store or any array is touched; never exit 1 with a numpy, DuckDB or memory
failure, and never a value quietly taken (`--margin nan`, `harnesses --show -1`)."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import REPO, run_cli

from fragility_tui.commands import flag_checks

BIG = str(10 ** 12)  # without the checks: numpy asked for terabytes at once (MemoryError)
LOGS = REPO / "tests" / "fixtures" / "logs" / "lmeval"
MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A small synthetic grid `g` (4 models x 120 items x 26 configs)."""
    path = tmp_path_factory.mktemp("numflags") / "s.duckdb"
    run_cli("simulate", "--models", "4", "--items", "120", "--grid", "g", db=path, check=True)
    return path


def refused(proc, flag: str, *words: str) -> None:
    """Exit 2, one `error:` line on stderr naming `flag` and each of `words`, no stdout."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert f"field {flag!r}" in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    assert "internal failure" not in proc.stderr and proc.stdout == ""


def grids(db) -> list[str]:
    return [g["name"] for g in json.loads(run_cli("grids", "--json", db=db, check=True).stdout)]


# -- 1. seeds: every command with a --seed takes compare's and run's check ------------------

@pytest.mark.parametrize("command", [
    ("report", "--grid", "g"),
    ("calibrate", "--grid", "g", "--replicates", "2", "--boot", "5"),
    ("selfcheck", "decisions", "--replicates", "1", "--boot", "5"),
    ("simulate", "--grid", "s2", "--models", "2", "--items", "8"),
])
@pytest.mark.parametrize("seed", ["-1", str(2 ** 63)])
def test_a_seed_out_of_range_is_refused_by_every_command(db, command, seed):
    refused(run_cli(*command, "--seed", seed, db=db), "--seed", f"got {seed}", "2**63 - 1")
    assert "s2" not in grids(db)


def test_the_largest_seed_is_taken(db):
    out = run_cli("report", "--grid", "g", "--boot", "20", "--random-draws", "5", "--json",
                  "--seed", str(2 ** 63 - 1), db=db, check=True).stdout
    assert json.loads(out)["settings"]["seed"] == 2 ** 63 - 1


# -- 2. --margin: finite, at least 0 and below 100, as compare's ----------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "100", "1e300"])
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_report_refuses_a_margin_compare_refuses(db, value, json_flag):
    # --margin=-inf: argparse reads a bare `-inf` as an option
    proc = run_cli("report", "--grid", "g", f"--margin={value}", *json_flag, db=db)
    refused(proc, "--margin", "from 0 up to (not including) 100")
    compare = run_cli("compare", "synthetic-model-01", "synthetic-model-02", "--grid", "g",
                      f"--margin={value}", db=db)
    assert compare.stderr.split(":", 2)[1:] == proc.stderr.split(":", 2)[1:]


def test_report_takes_a_margin_of_0(db):
    out = run_cli("report", "--grid", "g", "--margin", "0", "--boot", "20", "--random-draws",
                  "5", "--json", db=db, check=True).stdout
    assert json.loads(out)["settings"]["margin"] == 0


# -- 3. counts that size arrays: bounded before anything is allocated ------------------------

@pytest.mark.parametrize("args, flag, words", [
    # the grid does not exist: the flag is refused before the store is read
    (("report", "--grid", "nope", "--boot", "100000000"), "--boot", ["from 1 to 100,000"]),
    (("report", "--grid", "nope", "--boot", "100001"), "--boot", ["got 100001"]),
    (("report", "--grid", "nope", "--boot", "0"), "--boot", ["from 1 to 100,000"]),
    (("report", "--grid", "nope", "--random-draws", "100001"), "--random-draws",
     ["from 1 to 100,000"]),
    (("report", "--grid", "nope", "--k", "0"), "--k", ["at least 1"]),
    (("calibrate", "--grid", "nope", "--replicates", "10001"), "--replicates",
     ["from 1 to 10,000", "got 10001"]),
    (("calibrate", "--grid", "nope", "--boot", "100001"), "--boot", ["from 1 to 100,000"]),
    # a real grid: numpy failed allocating at once without the check
    (("calibrate", "--grid", "g", "--boot", BIG), "--boot", [f"got {BIG}"]),
    (("selfcheck", "decisions", "--boot", BIG), "--boot", ["from 1 to 100,000"]),
    (("simulate", "--grid", "s3", "--models", "100000", "--items", "100000"), "--models/--items",
     ["260,000,000,000 cells", "at most 260,000,000"]),
    (("simulate", "--grid", "s3", "--items", BIG), "--items", ["from 1 to 1,000,000"]),
    (("simulate", "--grid", "s3", "--models", BIG, "--items", "1"), "--models",
     ["from 1 to 100,000"]),
    (("simulate", "--grid", "s3", "--models", "0"), "--models", ["got 0"]),
])
def test_an_absurd_count_is_refused_naming_its_bound(db, args, flag, words):
    refused(run_cli(*args, db=db), flag, *words)
    assert "s3" not in grids(db)


def test_random_draws_are_bounded_with_k_once_the_view_is_known(db):
    # 100,000 subsets of 110 of the 120 items: 11 M item indices
    proc = run_cli("report", "--grid", "g", "--k", "110", "--random-draws", "100000", db=db)
    refused(proc, "--random-draws", "11,000,000 item indices", "at most 10,000,000",
            "90,909 or less")
    # k at least the items in view: one draw is the whole view, nothing to bound
    run_cli("report", "--grid", "g", "--k", "120", "--random-draws", "100000", "--boot", "20",
            db=db, check=True)


# -- 4. harnesses --show: 0 lists none, a negative number is refused --------------------------

@pytest.fixture(scope="module")
def harness_db(tmp_path_factory, samples_template):
    path = tmp_path_factory.mktemp("harnesses") / "s.duckdb"
    shutil.copyfile(samples_template, path)
    run_cli("import-log", str(LOGS / "mc"), str(LOGS / "gen"), "--grid", "starter-real",
            "--model", MODEL, db=path, check=True)
    return path


def test_harnesses_show_refuses_a_negative_count_and_takes_0(harness_db):
    args = ("harnesses", "--grid", "starter-real", "--model", MODEL)
    refused(run_cli(*args, "--show", "-1", db=harness_db), "--show", "0 (none) or more",
            "got -1")
    listed = lambda text: [ln for ln in text.splitlines() if ": right under " in ln]  # noqa: E731
    assert listed(run_cli(*args, "--show", "0", db=harness_db, check=True).stdout) == []
    assert len(listed(run_cli(*args, "--show", "3", db=harness_db, check=True).stdout)) == 3


# -- the other numeric flags ---------------------------------------------------------------

MISSING = str(REPO / "no-such-items.jsonl")  # never read: the flag is refused first
OPENAI = ("run", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
          "--served-model", "m", "--grid", "g", "--items", MISSING)


@pytest.mark.parametrize("args, flag, words", [
    (("compare", "a", "b", "--grid", "g", "--chunk", str(2 ** 31)), "--chunk",
     ["2,147,483,647", "INTEGER"]),
    (("compare", "a", "b", "--grid", "g", "--threads", "1025"), "--threads",
     ["from 1 to 1,024"]),
    (("compare", "a", "b", "--grid", "g", "--max-new-tokens", "32769"), "--max-new-tokens",
     ["from 1 to 32,768"]),
    (("run", "--model", MODEL, "--grid", "g", "--items", MISSING, "--threads", "100000"),
     "--threads", ["got 100000"]),
    (("run", "--model", MODEL, "--grid", "g", "--items", MISSING, "--max-new-tokens",
      str(10 ** 20)), "--max-new-tokens", ["from 1 to 32,768"]),
    (("run", "--model", MODEL, "--grid", "g", "--items", MISSING, "--plan-workers", "65"),
     "--plan-workers", ["from 0 to 64"]),
    (("run", "--model", MODEL, "--grid", "g", "--items", MISSING, "--ray", "--shards",
      "10001"), "--shards", ["from 1 to 10,000"]),
    (("run", "--model", MODEL, "--grid", "g", "--items", MISSING, "--ray",
      "--gpus-per-task", "nan"), "--gpus-per-task", ["got nan"]),
    ((*OPENAI, "--request-timeout", "1e10"), "--request-timeout", ["at most 86,400"]),
    ((*OPENAI, "--request-timeout", "inf"), "--request-timeout", ["got inf"]),
    ((*OPENAI, "--request-timeout", "nan"), "--request-timeout", ["got nan"]),
    ((*OPENAI, "--concurrency", "1025"), "--concurrency", ["from 1 to 1,024"]),
    ((*OPENAI, "--concurrency", "0"), "--concurrency", ["got 0"]),
])
def test_the_other_numeric_flags(tmp_path, args, flag, words):
    db = tmp_path / "s.duckdb"
    refused(run_cli(*args, db=db), flag, *words)


def test_the_bounds_are_what_the_help_and_the_runner_say():
    from runners.backends.transformers.decoding import DECODE_GROUP_LEAVES
    from runners.plan.budget import MAX_TOKENS

    from fragility_tui.commands import run as run_command

    assert flag_checks.MAX_NEW_TOKENS_MAX == MAX_TOKENS // (2 * DECODE_GROUP_LEAVES)
    text = " ".join(run_cli("run", "--help", check=True).stdout.split())
    for flag, bound in (("--max-new-tokens", flag_checks.MAX_NEW_TOKENS_MAX),
                        ("--threads", flag_checks.THREADS_MAX),
                        ("--plan-workers", run_command.PLAN_WORKERS_MAX),
                        ("--concurrency", run_command.CONCURRENCY_MAX),
                        ("--request-timeout", run_command.REQUEST_TIMEOUT_MAX),
                        ("--shards", run_command.SHARDS_MAX)):
        help_of = text.split(f" {flag} ", 1)[1][:400]
        assert f"at most {bound:,g}" in help_of, flag
    for command, bound in ((("report",), "at most 100,000"), (("calibrate",), "at most 10,000"),
                           (("selfcheck",), "at most 100,000"),
                           (("simulate",), "at most 260,000,000 cells")):
        assert bound in " ".join(run_cli(*command, "--help", check=True).stdout.split())


@pytest.mark.parametrize("args, flag", [
    (["report", "--grid", "g", "--configs", ""], "--configs"),
    (["report", "--grid", "g", "--models", " , "], "--models"),
    (["report", "--grid", "g", "--benchmarks", ""], "--benchmarks"),
    (["run", "--model", MODEL, "--configs", "", "--grid", "new"], "--configs"),
])
def test_an_empty_list_flag_is_refused_not_read_as_the_default(db, args, flag):
    """`--configs ''` (a script's unset variable) quietly meant the paper's 26 configs."""
    refused(run_cli(*args, db=db), flag, "is empty")
