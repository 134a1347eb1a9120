"""Import speed of `import-log` on a generated lm-eval log (issue 55: 1 M sample rows in
<= 30 s and <= 2 GB here).

The log is lm-eval 0.4.13's own shape, made from the committed real fixture
(tests/fixtures/logs/lmeval/mc): its 40 sample lines repeated with distinct item ids and
question texts, so every row is its own item (the heaviest case: the items come from the
log's docs and all go into the grid), beside the real results file. Runs the CLI as a
subprocess and reports its wall time and peak memory (the summed RSS of the command and the
process it reads the log in, sampled every 50 ms; at least the largest one's max RSS).

    python benchmarks/bench_import_log.py [--rows 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "logs" / "lmeval" / "mc"
TARGET_S, TARGET_GB = 30.0, 2.0


def make_log(folder: Path, rows: int) -> Path:
    src = next(FIXTURE.rglob("samples_*.jsonl"))
    shutil.copy(next(src.parent.glob("results*.json")), folder / "results_bench.json")
    lines = [json.loads(line) for line in src.read_text().splitlines()]
    out = folder / "samples_fragility_starter_bench.jsonl"
    with open(out, "w") as fh:
        for k in range(rows):
            rec = dict(lines[k % len(lines)])
            doc = dict(rec["doc"])
            doc["id"] = f"{doc['id']}-{k}"
            doc["question"] = f"{doc['question']} ({k})"
            rec["doc"], rec["doc_id"] = doc, k
            fh.write(json.dumps(rec) + "\n")
    return out


def tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and its descendants (Linux /proc), in kB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines()
                              if line.startswith("VmRSS:")))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += map(int, (task / "children").read_text().split())
        except (OSError, StopIteration, ValueError):
            continue
    return total


def tree_peak_gb(proc, every_s: float = 0.05) -> float:
    """The peak of the tree's summed RSS while the command runs (sampled)."""
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_kb(proc.pid))
        time.sleep(every_s)
    return peak / 2**20


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keep", metavar="DIR", help="write the log and store here and keep them")
    args = ap.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="bench-import-log-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        samples = make_log(folder, args.rows)
        made = time.perf_counter() - t0
        db = folder / "bench.duckdb"
        db.unlink(missing_ok=True)
        command = [sys.executable, "-m", "fragility_tui.cli", "--db", str(db), "import-log",
                   str(samples), "--grid", "bench", "--model", "m"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=REPO)
        peak_gb = tree_peak_gb(proc)  # the command and its log-reading child, together
        out, err = proc.communicate()
        wall = time.perf_counter() - t0
        peak_gb = max(peak_gb, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20)
        if proc.returncode != 0:
            print(err, file=sys.stderr)
            return 1
        size_mb = samples.stat().st_size / 2**20
        print(f"import-log of {args.rows:,} lm-eval sample rows ({size_mb:,.0f} MB; made in "
              f"{made:.1f} s): {wall:.1f} s, peak RSS {peak_gb:.2f} GB "
              f"(targets {TARGET_S:.0f} s, {TARGET_GB:.0f} GB)")
        print(out.strip().splitlines()[-1])
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
