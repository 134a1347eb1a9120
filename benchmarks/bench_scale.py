"""Grids at scale (issue 11), run by `make bench`; a plain script, not a test.

Whole commands on a 100 models x 20,000 items x 26 configs grid (52 M cells), each in a
fresh process whose peak RSS is measured (resource.getrusage of its own wrapper):
1. `fragility-tui import` of a 52 M-cell Parquet file into a fresh store: <= 60 s, <= 2 GB
2. `fragility-tui simulate --models 100 --items 20000`: <= 4 GB
3. `fragility-tui merge` of the same 52 M cells as 4 shard workers' parts, then the same
   merge again (idempotent: adds nothing)

Usage: .venv/bin/python benchmarks/bench_scale.py [--strict]
--strict exits 1 when a target is missed (timings on a loaded machine vary).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.targets import Targets  # noqa: E402

MODELS, ITEMS, SHARDS = 100, 20000, 4
MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"seconds": time.perf_counter() - start, "rc": done.returncode,
                  "out": done.stdout[-20000:], "err": done.stderr[-2000:],
                  "peak_gb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20}))
"""


def measure(*args: str) -> dict:
    """Run `fragility-tui ARGS` in a fresh process; its wall time and peak RSS."""
    cmd = [sys.executable, "-c", MEASURE, sys.executable, "-m", "fragility_tui.cli", *args]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"})
    result = json.loads(done.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"fragility-tui {' '.join(args)} failed:\n{result['err']}")
    return result


def write_big_grid(path: Path) -> None:
    """A long-format Parquet grid of MODELS x ITEMS x 26 cells (model, item, benchmark,
    config, correct), written a model at a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fragility_tui.harness.configs import CONFIG_IDS

    rng = np.random.default_rng(0)
    benchmarks = np.array(["arc_challenge", "hellaswag", "mmlu", "truthfulqa"])
    item_bench = benchmarks[np.arange(ITEMS) % 4]
    items = [f"{b}/sim_{k:05d}" for k, b in enumerate(item_bench)]
    n = ITEMS * 26
    item_codes = np.repeat(np.arange(ITEMS, dtype=np.int32), 26)
    config_codes = np.tile(np.arange(26, dtype=np.int32), ITEMS)

    def text(codes, values):
        return pa.DictionaryArray.from_arrays(codes, list(values)).cast(pa.string())

    schema = pa.schema([("model", pa.string()), ("item", pa.string()),
                        ("benchmark", pa.string()), ("config", pa.string()),
                        ("correct", pa.bool_())])
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for m in range(MODELS):
            writer.write_table(pa.table({
                "model": text(np.zeros(n, np.int32), [f"model-{m:03d}"]),
                "item": text(item_codes, items), "benchmark": text(item_codes, item_bench),
                "config": text(config_codes, CONFIG_IDS),
                "correct": rng.random(n) < 0.6}, schema=schema))


def write_parts(grid: Path, folder: Path) -> None:
    """The same cells as SHARDS workers' `run --out-parts` output (parts, items, runs)."""
    import duckdb

    from fragility_tui.store.parts import part_schema

    for sub in ("cells", "items", "runs"):
        (folder / sub).mkdir(parents=True)
    con = duckdb.connect()
    columns = ", ".join(f"NULL::{_sql_type(f.type)} AS {f.name}"
                        for f in part_schema() if f.name not in (
                            "model", "item", "benchmark", "config", "correct", "run_id"))
    models = [f"model-{m:03d}" for m in range(MODELS)]
    for k in range(SHARDS):
        run_id = f"bench-shard-{k}"
        where = f"hash(item) % {SHARDS} = {k}"
        con.execute(f"""COPY (SELECT model, item, benchmark, config, correct, {columns},
                               '{run_id}' AS run_id FROM read_parquet('{grid}') WHERE {where})
                        TO '{folder}/cells/{run_id}-000001.parquet' (FORMAT parquet)""")
        con.execute(f"""COPY (SELECT item AS item_uid, CAST(min(file_row_number) AS BIGINT)
                                     AS position, any_value(benchmark) AS benchmark,
                                     NULL::VARCHAR AS subject, '' AS question,
                                     ['a', 'b', 'c', 'd'] AS choices, 0 AS gold
                              FROM read_parquet('{grid}', file_row_number = true)
                              WHERE {where} GROUP BY item)
                        TO '{folder}/items/{run_id}.parquet' (FORMAT parquet)""")
        (folder / "runs" / f"{run_id}.json").write_text(json.dumps({
            "run_id": run_id, "grid": "big", "status": "finished",
            "spec": {"shard": [k, SHARDS]},
            "provenance": {"seed": 0, "item_set_hash": "bench"},
            "models": {m: {"source": "bench", "fingerprint": {"bench": True}} for m in models}}))


def _sql_type(arrow_type) -> str:
    return {"int8": "TINYINT", "int32": "INTEGER", "float": "REAL",
            "list<item: double>": "DOUBLE[]"}.get(str(arrow_type), "VARCHAR")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    targets = Targets("compare the load average: a shared machine slows every figure")

    def report(name: str, result: dict, seconds: float | None, peak: float | None) -> None:
        ok = targets.check(name, (seconds is None or result["seconds"] <= seconds) and (
            peak is None or result["peak_gb"] <= peak))
        target = " and ".join(t for t in (seconds and f"<= {seconds:g} s",
                                          peak and f"<= {peak:g} GB") if t)
        print(f"{name:<46} {result['seconds']:7.1f} s  peak {result['peak_gb']:5.2f} GB"
              + (f"  (target {target}) {'ok' if ok else 'MISSED'}" if target else ""))

    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}; "
          f"{MODELS} models x {ITEMS} items x 26 configs = {MODELS * ITEMS * 26:,} cells")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        grid = tmp / "grid.parquet"
        write_big_grid(grid)
        print(f"long-format Parquet file: {grid.stat().st_size / 2**20:.0f} MiB")
        report("import into a fresh store", measure(
            "import", str(grid), "--grid", "big", "--db", str(tmp / "import.duckdb")), 60, 2)
        report("simulate --models 100 --items 20000", measure(
            "simulate", "--models", str(MODELS), "--items", str(ITEMS), "--grid", "sim",
            "--db", str(tmp / "simulate.duckdb")), None, 4)
        parts = tmp / "parts"
        write_parts(grid, parts)
        db = str(tmp / "merge.duckdb")
        report(f"merge {SHARDS} shards' parts into a fresh store", measure(
            "merge", str(parts), "--grid", "big", "--db", db), None, None)
        again = measure("merge", str(parts), "--grid", "big", "--db", db, "--json")
        report("the same merge again", again, None, None)
        print(f"  cells added the second time: {json.loads(again['out'])['cells_added']}")
    return targets.finish(args.strict)


if __name__ == "__main__":
    sys.exit(main())
