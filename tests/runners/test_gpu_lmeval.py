"""benchmarks/gpu_lmeval.py, lm-eval against the runner on a GPU (issue 59 item 8), on the
CPU: the runner's side on a tiny model folder, the comparison read back from files in the
shape lm-eval 0.4.13 writes (its --log_samples lines), and the job's clear stops. The whole
job's CPU dry run (lm-eval installed from its own wheelhouse) takes ~50 s and is run by
hand: docs/runner.md, "lm-eval on the GPU"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_lmeval.py"
STARTER = REPO / "sample_grids" / "starter_items.jsonl"


def _script(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _sample(doc_id: int, item: dict, lls: list[float]) -> dict:
    """One --log_samples line as lm-eval 0.4.13 writes it for our cloze task."""
    context = f"Question: {item['question']}\nAnswer:"
    return {"doc_id": doc_id, "doc": item, "target": str(item["gold"]),
            "arguments": {f"gen_args_{k}": {"arg_0": context, "arg_1": " " + choice}
                          for k, choice in enumerate(item["choices"])},
            "resps": [[[str(ll), "False"]] for ll in lls],
            "filtered_resps": [[str(ll), "False"] for ll in lls]}


def test_the_runners_side_and_the_comparison_read_back(tiny_folder, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    items = [json.loads(line) for line in STARTER.read_text().splitlines()[:2]]
    (out / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    done = _script("ours", "--model", str(tiny_folder), "--items", str(out / "items.jsonl"),
                   "--device", "cpu", "--out", str(out / "ours-1.json"))
    assert done.returncode == 0, done.stderr[-2000:]
    cells = json.loads((out / "ours-1.json").read_text())["cells"]
    assert len(cells) == 2 and all(len(scores) == 4 for _, scores in cells.values())
    uids = sorted(cells)
    (out / "ours-2.json").write_text((out / "ours-1.json").read_text())  # the second pair's
    (out / "lmeval.json").write_text(json.dumps({
        "device": "cpu", "gpu": None, "items": 2, "lmeval_batch": "auto",
        "model": "tiny", "pairs": [{"lmeval_s": 10.0, "ours_s": 4.0, "ratio": 0.4},
                                   {"lmeval_s": 9.0, "ours_s": 4.5, "ratio": 0.5}]}))

    def samples(shift: float) -> None:  # lm-eval's log-likelihoods: ours, the first moved
        lines = []
        for n, item in enumerate(items):
            uid = next(u for u in uids if u.endswith("/" + item["id"]))
            lls = list(cells[uid][1])
            if n == 0:
                lls[cells[uid][0]] += shift
            lines.append(json.dumps(_sample(n, item, lls)))
        (out / "lmeval-samples.jsonl").write_text("\n".join(lines) + "\n")

    samples(0.0)
    same = _script("compare", "--out", str(out))
    assert same.returncode == 0, same.stderr[-2000:]
    assert "same acc_norm prediction on 2/2 items; largest log-likelihood gap 0" in same.stdout
    assert "median 0.5x (0.4-0.5x)" in same.stdout
    samples(-1e4)  # lm-eval's best option of the first item sinks: another prediction
    moved = _script("compare", "--out", str(out))
    assert "same acc_norm prediction on 1/2 items; largest log-likelihood gap 1e+04" in \
        moved.stdout, moved.stdout + moved.stderr


def test_the_job_stops_clearly_without_its_items_or_wheels(tmp_path):
    missing = _script("run", "--out", str(tmp_path / "o"), "--items",
                      str(tmp_path / "none.jsonl"), "--device", "cpu")
    assert missing.returncode == 1
    assert "no items at" in missing.stderr and "make gpu-lmeval-items" in missing.stderr
    box = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_lmeval_box.sh")],
                         env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "o"),
                              "LMEVAL_WHEELS": str(tmp_path / "no-wheels")},
                         capture_output=True, text=True, timeout=60)
    assert box.returncode == 2 and "make gpu-lmeval-wheels" in box.stdout
