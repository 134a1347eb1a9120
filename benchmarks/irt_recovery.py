"""How well the 2PL fit (fragility_tui/analysis/irt.py) recovers known slopes as the number
of models grows: the measurement behind irt.MIN_MODELS and the table in docs/spec.md.

Each grid: θ ~ N(0, 1) per model, a ~ U(0.3, 2.5) and b ~ N(0, 1) per item, P(correct) =
σ(a(θ − b)), every cell present. Prints, per model count, r(fitted a, true a) for each seed,
their mean, and the share of items whose true slope lies within fitted ± 1.96·SE.
Not run by tests (about two minutes on one core): `python benchmarks/irt_recovery.py`.
"""

from __future__ import annotations

import argparse

import numpy as np

from fragility_tui.analysis.irt import fit_2pl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", default="12,25,50,100,200,400")
    args = parser.parse_args()
    print("models  r per seed               mean r  SE coverage")
    for n_models in (int(m) for m in args.models.split(",")):
        rs, cover = [], []
        for seed in range(args.seeds):
            rng = np.random.default_rng([seed, n_models])
            theta = rng.normal(size=n_models)
            a, b = rng.uniform(0.3, 2.5, args.items), rng.normal(size=args.items)
            bits = rng.random((n_models, args.items)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))
            fit = fit_2pl(bits, np.ones_like(bits))
            ok = np.isfinite(fit.a)
            rs.append(float(np.corrcoef(fit.a[ok], a[ok])[0, 1]))
            cover.append(float(np.mean(np.abs(fit.a[ok] - a[ok]) <= 1.96 * fit.a_se[ok])))
        print(f"{n_models:6d}  {' '.join(f'{r:.3f}' for r in rs):23s}  {np.mean(rs):.3f}"
              f"   {np.mean(cover):.2f}")


if __name__ == "__main__":
    main()
