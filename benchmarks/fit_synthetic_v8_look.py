"""The one look of benchmarks/fit_synthetic_v8_prereg.md: generator v7 (v8 at conviction_sd 0)
against v8 on the acceptance seeds 1-8 and on fresh seeds 200-223, report defaults.

    PYTHONPATH=. python benchmarks/fit_synthetic_v8_look.py   # ~40 s on 2 cores

Writes benchmarks/fit_synthetic_v8_look.json (every figure per version and seed) and prints,
per version, the figures inside on fewer than 6 of seeds 1-8 and on fewer than 18 of 24 of
seeds 200-223, and on what share of 5,000 random 8-seed subsets of seeds 200-223 all
figures are inside on at least 6 of the 8 (the acceptance, asked of fresh draws).
`--from-json` prints the same from the written file without drawing again.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per worker, set before numpy loads

import json  # noqa: E402
import multiprocessing  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

from fragility_tui.analysis.reference_figures import FIGURES, figures, within  # noqa: E402
from fragility_tui.analysis.report import build_report  # noqa: E402
from fragility_tui.grid.simulate import SimulationParams, simulate  # noqa: E402

OUT = Path(__file__).with_name("fit_synthetic_v8_look.json")
VERSIONS = {"v7": replace(SimulationParams(), conviction_sd=0.0), "v8": SimulationParams()}
ACCEPTANCE, FRESH = range(1, 9), range(200, 224)


def _figures(job: tuple[str, int]) -> tuple[str, int, dict]:
    version, seed = job
    return version, seed, figures(build_report(simulate(12, 3679, seed,
                                                        params=VERSIONS[version]).cube))


def _inside(draws: dict[int, dict], key: str, seeds) -> int:
    return sum(draws[s][key] is not None and within(key, draws[s][key]) for s in seeds)


def _acceptance_share(by_seed: dict[int, dict], subsets: int = 5000) -> float:
    """Share of random 8-seed subsets of FRESH on which every figure is inside on >= 6."""
    rng = random.Random(0)
    passed = 0
    for _ in range(subsets):
        chosen = rng.sample(list(FRESH), 8)
        passed += all(_inside(by_seed, k, chosen) >= 6 for k in FIGURES)
    return passed / subsets


def main() -> None:
    if "--from-json" in sys.argv[1:]:
        draws = {v: {int(s): f for s, f in by_seed.items()}
                 for v, by_seed in json.loads(OUT.read_text()).items()}
    else:
        jobs = [(v, s) for v in VERSIONS for s in [*ACCEPTANCE, *FRESH]]
        with multiprocessing.get_context("fork").Pool(2) as pool:
            rows = pool.map(_figures, jobs)
        draws = {}
        for version, seed, figs in rows:
            draws.setdefault(version, {})[seed] = figs
        OUT.write_text(json.dumps(draws, indent=1) + "\n")
    for version, by_seed in draws.items():
        missed = [k for k in FIGURES if _inside(by_seed, k, ACCEPTANCE) < 6]
        fresh = {k: _inside(by_seed, k, FRESH) for k in FIGURES}
        print(f"{version}: seeds 1-8, inside on fewer than 6: {missed}; seeds 200-223, "
              f"inside on fewer than 18: {({k: n for k, n in fresh.items() if n < 18})}; "
              f"all figures on 6 of 8: {_acceptance_share(by_seed):.3f} of 8-seed subsets")


if __name__ == "__main__":
    main()
