"""Timings of the analysis engine (issues 3 and 43), run by `make bench`; a plain script, not a test.

1. in-process `build_report` on the simulated paper-size grid (12 x 3,679 x 26): < 1 s
2. `fragility-tui report --json` as a whole command (start-up, store, analysis, output) on a
   store holding that grid: < 0.5 s (issue 43), median of --repeats runs
3. the same whole command on 100 models x 20,000 items x 26 configs: < 10 s (issue 43)
4. `build_report` on that grid in a child process: < 20 s and < 4 GB peak RSS
   (resource.getrusage; the child's peak includes simulating the grid)

--baseline DIR times the same commands in another checkout (e.g. `git worktree add
/tmp/before COMMIT`), alternating with this one, and prints before/after ratios; both
must print the same report (checked byte for byte).

Usage: .venv/bin/python benchmarks/bench_analysis.py [--skip-large] [--strict]
       [--repeats N] [--baseline DIR]
--strict exits 1 when a target is missed (timings on a loaded machine vary).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.targets import Targets  # noqa: E402
from fragility_tui.cli import quiet_blas_threads  # noqa: E402

quiet_blas_threads()  # as the command does, before numpy loads (the in-process timings)

PAPER = (12, 3679)
LARGE = (100, 20000)


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """`fragility-tui ARGS` run from checkout `cwd` (`python -m` puts it first on sys.path)."""
    return subprocess.run([sys.executable, "-m", "fragility_tui.cli", *args], cwd=cwd,
                          capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"})


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_in_process() -> tuple[float, float, dict]:
    from fragility_tui.analysis.report import build_report
    from fragility_tui.grid.simulate import simulate_cube

    cube = simulate_cube(*PAPER, seed=0)
    build_report(cube)  # warm-up: first-call imports and allocations
    times, cpu = [], []
    for _ in range(3):
        start, start_cpu = time.perf_counter(), time.process_time()
        report = build_report(cube)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times), statistics.median(cpu), report


def simulated_store(tmp: str, shape: tuple[int, int], name: str) -> str | None:
    db = str(Path(tmp) / f"{name}.duckdb")
    made = _cli("simulate", "--models", str(shape[0]), "--items", str(shape[1]),
                "--grid", name, "--db", db)
    if made.returncode != 0:
        print(f"  (skipped: `fragility-tui simulate` failed: {made.stderr.strip()})")
        return None
    return db


def bench_command(db: str, grid: str, repeats: int, trees: dict[str, Path]) -> dict | None:
    """Median and minimum wall time, and median CPU time (this process's children: every
    thread of the command), of `report --grid GRID --json` per checkout, the checkouts
    alternating run by run so they see the same load; the first run of each (cold file
    cache) is not counted. Each checkout's package is byte-compiled first: where
    PYTHONDONTWRITEBYTECODE is set (this VM), every run would otherwise compile it again
    (~25 ms). Every checkout's JSON must be the same."""
    times = {k: [] for k in trees}
    cpu = {k: [] for k in trees}
    outputs = {}
    for tree in trees.values():  # bytecode, as `make run` and a pip install leave it
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "fragility_tui")],
                       check=True)
    for run in range(repeats + 1):
        for key, tree in trees.items():
            start, start_cpu = time.perf_counter(), _children_cpu()
            done = _cli("report", "--grid", grid, "--json", "--db", db, cwd=tree)
            seconds, used = time.perf_counter() - start, _children_cpu() - start_cpu
            if done.returncode != 0:
                print(f"  (report failed in {tree}: {done.stderr.strip()})")
                return None
            json.loads(done.stdout)
            outputs[key] = done.stdout
            if run:
                times[key].append(seconds)
                cpu[key].append(used)
    if len(set(outputs.values())) > 1:
        raise SystemExit("the checkouts print different reports: " + ", ".join(outputs))
    med = statistics.median
    return {k: {"median": med(times[k]), "min": min(times[k]), "cpu": med(cpu[k])}
            for k in trees}


def large_child() -> None:
    """Runs in its own process so its peak RSS is the large run's alone."""
    from fragility_tui.analysis.report import build_report
    from fragility_tui.grid.simulate import simulate_cube

    cube = simulate_cube(*LARGE, seed=0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start, start_cpu = time.perf_counter(), time.process_time()
    build_report(cube)
    seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_gb": peak / 2**20,
                      "peak_before_report_gb": before / 2**20}))


def bench_large() -> dict:
    done = subprocess.run([sys.executable, __file__, "--large-child"], cwd=REPO,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"large run failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _figures(r: dict) -> list[str]:
    top = r["bands"][0]
    pairs = r["pairs_summary"]
    ax = r["axes"]["mean"]
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    d, c = r["discrimination"], r["compression"]
    return [
        f"top model {top['model']}: reference {100 * top['reference']:.1f}%, low "
        f"{100 * top['min']:.1f}%, high {100 * top['max']:.1f}%, fragile share of "
        f"reference-correct {100 * top['fragile_share_of_reference_correct']:.0f}%",
        f"robust accuracy max {100 * max(b['robust_accuracy'] for b in r['bands']):.1f}%",
        f"adjacent pairs: verdicts {_count(p['verdict'] for p in r['pairs'] if p['adjacent'])}; "
        f"{pairs['manufactured']} of {pairs['nonzero_gaps']} nonzero gaps manufactured; "
        f"fragile share mean {fmt(pairs['mean_fragile_share'])}, pooled "
        f"{fmt(pairs['pooled_fragile_share'])}",
        f"champions {r['rankings']['champion_count']}, top-3 {len(r['rankings']['top3_models'])}, "
        f"mean tau-b {fmt(r['rankings']['mean_kendall_tau'])}, flipped "
        f"{fmt(r['rankings']['mean_flipped_pair_fraction'])}",
        f"discrimination-fragility r {fmt(d['r'])} CI "
        f"{d['ci'] and [round(x, 2) for x in d['ci']]}; top-{d['top_k']} fragility "
        f"{fmt(d['top_k_mean_fragility'])} vs {fmt(d['mean_fragility'])}",
        f"compression to {c['k']}: random {fmt(c['random_mean_champions'])}, by discrimination "
        f"{fmt(c['discriminative_mean_champions'])}",
        f"axes: order {fmt(ax['order'])}, format {fmt(ax['format'])}, scoring "
        f"{fmt(ax['scoring'])}, all {fmt(ax['all'])}",
        f"decision labels: {_count(x['label'] for x in r['decisions'])}",
    ]


def _count(values) -> str:
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--skip-large", action="store_true", help="skip the 100 x 20,000 runs")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--repeats", type=int, default=5, metavar="N",
                    help="timed runs of each whole command (default 5; the large one: 3)")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="another checkout to time alternately (before/after ratios)")
    args = ap.parse_args()
    if args.large_child:
        large_child()
        return 0
    targets = Targets("wall time: compare the cpu time and the load average when the machine "
                      "is shared")

    def verdict(name: str, value: float | None, limit: float, unit: str,
                cpu: float | None = None) -> None:
        if value is None:
            print(f"{name:<52} skipped")
            return
        ok = targets.check(name, value < limit)
        extra = "" if cpu is None else f"  [cpu {cpu:.2f} s]"
        print(f"{name:<52} {value:8.2f} {unit:<3} (target < {limit:g}) "
              f"{'ok' if ok else 'MISSED'}{extra}")

    def command(label: str, db: str | None, grid: str, limit: float, repeats: int) -> None:
        trees = {"this": REPO, **({"baseline": args.baseline} if args.baseline else {})}
        result = bench_command(db, grid, repeats, trees) if db else None
        this = result and result["this"]
        verdict(f"{label} (median of {repeats})", this and this["median"], limit, "s",
                this and this["cpu"])
        if this:
            print(f"  min {this['min']:.2f} s; load average now {os.getloadavg()[0]:.1f}")
        if result and args.baseline:
            base = result["baseline"]
            print(f"  baseline {args.baseline}: median {base['median']:.2f} s, min "
                  f"{base['min']:.2f} s, cpu {base['cpu']:.2f} s; before/after: wall "
                  f"{base['median'] / this['median']:.2f}x, cpu {base['cpu'] / this['cpu']:.2f}x"
                  " (same JSON)")

    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    seconds, cpu, report = bench_in_process()
    print("figures on the SYNTHETIC paper-size grid (simulated, not real model output):")
    for line in _figures(report):
        print("  " + line)
    verdict("build_report 12 x 3,679 x 26, in-process (median)", seconds, 1.0, "s", cpu)
    with tempfile.TemporaryDirectory() as tmp:
        command("report --json 12 x 3,679 x 26, whole command", simulated_store(tmp, PAPER, "paper"),
                "paper", 0.5, args.repeats)
        if not args.skip_large:
            command("report --json 100 x 20,000 x 26, whole command",
                    simulated_store(tmp, LARGE, "large"), "large", 10.0, min(args.repeats, 3))
    if not args.skip_large:
        large = bench_large()
        verdict("build_report 100 x 20,000 x 26", large["seconds"], 20.0, "s", large["cpu"])
        verdict("  peak RSS of that process", large["peak_gb"], 4.0, "GB")
        print(f"  (of which simulating the grid: {large['peak_before_report_gb']:.2f} GB)")
    return targets.finish(args.strict)


if __name__ == "__main__":
    sys.exit(main())
