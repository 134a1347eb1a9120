"""The reference study's headline figures (SPEC "Reference figures") as read from a report,
beside the paper's values and the tolerance within which a synthetic grid (any seed, in most
draws) must reproduce each (docs/spec.md "The synthetic generator"; tests/grid/test_synthetic_figures.py).

Pure dict arithmetic over `build_report`'s output: the same report every pane reads.
"""

from __future__ import annotations

# key: (label, paper value, tolerance, kind) — kind "abs": |synthetic - paper| <= tolerance;
# "max": synthetic <= paper + tolerance (the paper gives a bound).
# Tolerances come from the spread of each figure over seeds, measured before the fit: half
# its 5-95% range over seeds 100-123 at the pre-fit parameters, rounded up to the paper's
# last digit (benchmarks/synthetic_spread_prefit.json; tests/grid/test_synthetic_figures.py
# checks these literals against that file). One 12-model grid is one draw: a figure that
# moves by 15 points from seed to seed cannot be held to 4.
FIGURES: dict[str, tuple[str, float, float, str]] = {
    "top_reference": ("top model: reference accuracy (%)", 88.0, 3.6, "abs"),
    "top_low": ("top model: lowest config accuracy (%)", 30.6, 11.5, "abs"),
    "top_high": ("top model: highest config accuracy (%)", 88.6, 10.0, "abs"),
    "top_spread": ("top model: spread (points)", 58.0, 16.5, "abs"),
    "top_fragile_share": ("top model: reference-correct answers fragile (%)", 85.0, 10.3, "abs"),
    "max_robust_accuracy": ("highest robust accuracy (%)", 21.5, 6.0, "max"),
    "models_robust_below_7": ("models with robust accuracy < 7%", 5, 2, "abs"),
    "pairs_identical": ("adjacent pairs identical on the stable set", 5, 2, "abs"),
    "pairs_one_item": ("adjacent pairs differing by one item", 4, 3, "abs"),
    "pairs_cancel": ("adjacent pairs that cancel", 2, 2, "abs"),
    "unmanufactured_gaps": ("nonzero gaps not manufactured", 0, 1, "abs"),
    "mean_fragile_share": ("fragile share, mean over pairs (%)", 95.7, 5.4, "abs"),
    "pooled_fragile_share": ("fragile share, pooled (%)", 99.7, 0.5, "abs"),
    "champions": ("models champion under some config", 4, 1, "abs"),
    "top3": ("models reaching the top 3", 8, 2, "abs"),
    "mean_kendall_tau": ("mean Kendall tau vs reference", 0.42, 0.13, "abs"),
    "flipped_fraction": ("pairwise orders flipped (mean fraction)", 0.29, 0.07, "abs"),
    "r": ("discrimination-fragility r", 0.28, 0.04, "abs"),
    "r_ci_low": ("  its 95% bootstrap CI: lower end", 0.25, 0.04, "abs"),
    "r_ci_high": ("  its 95% bootstrap CI: upper end", 0.30, 0.04, "abs"),
    "top100_fragility": ("top-100 discriminative items: mean fragility", 0.96, 0.03, "abs"),
    "mean_fragility": ("all items: mean fragility", 0.85, 0.02, "abs"),
    "compression_random": ("champions on 100 random items (mean)", 5.1, 1.18, "abs"),
    "compression_discriminative": ("champions on the 100 most discriminative", 5.7, 1.45, "abs"),
    "axis_order": ("preserved under order", 0.60, 0.02, "abs"),
    "axis_format": ("preserved under format", 0.40, 0.08, "abs"),
    "axis_scoring": ("preserved under scoring", 0.31, 0.05, "abs"),
    "axis_all": ("preserved under all three", 0.11, 0.03, "abs"),
}


def figures(report: dict) -> dict[str, float]:
    """Each FIGURES key read from a report (the top model = first in the reference ranking)."""
    top = report["bands"][0]
    pairs = [p for p in report["pairs"] if p["adjacent"]]
    verdicts = [p["verdict"] for p in pairs]
    nonzero = [p for p in pairs if p["gap"] != 0]
    ranks, disc, comp, axes = (report["rankings"], report["discrimination"],
                               report["compression"], report["axes"]["mean"])
    summary = report["pairs_summary"]
    return {
        "top_reference": 100 * top["reference"], "top_low": 100 * top["min"],
        "top_high": 100 * top["max"], "top_spread": 100 * top["spread"],
        "top_fragile_share": 100 * top["fragile_share_of_reference_correct"],
        "max_robust_accuracy": 100 * max(b["robust_accuracy"] for b in report["bands"]),
        "models_robust_below_7": sum(b["robust_accuracy"] < 0.07 for b in report["bands"]),
        "pairs_identical": verdicts.count("identical"),
        "pairs_one_item": verdicts.count("one item"),
        "pairs_cancel": verdicts.count("cancel"),
        "unmanufactured_gaps": sum(not p["manufactured"] for p in nonzero),
        "mean_fragile_share": 100 * summary["mean_fragile_share"],
        "pooled_fragile_share": 100 * summary["pooled_fragile_share"],
        "champions": ranks["champion_count"], "top3": len(ranks["top3_models"]),
        "mean_kendall_tau": ranks["mean_kendall_tau"],
        "flipped_fraction": ranks["mean_flipped_pair_fraction"],
        "r": disc["r"], "r_ci_low": (disc["ci"] or [None, None])[0],
        "r_ci_high": (disc["ci"] or [None, None])[1], "top100_fragility": disc["top_k_mean_fragility"],
        "mean_fragility": disc["mean_fragility"],
        "compression_random": comp["random_mean_champions"],
        "compression_discriminative": comp["discriminative_mean_champions"],
        "axis_order": axes["order"], "axis_format": axes["format"],
        "axis_scoring": axes["scoring"], "axis_all": axes["all"],
    }


def within(key: str, value: float) -> bool:
    _, paper, tol, kind = FIGURES[key]
    if kind == "max":
        return value <= paper + tol + 1e-9
    return abs(value - paper) <= tol + 1e-9


def _fmt(key: str, value) -> str:
    label, paper, _, _ = FIGURES[key]
    if value is None:
        return "—"
    if isinstance(paper, int):
        return f"{value:g}" if float(value).is_integer() else f"{value:.2f}"
    return f"{value:.1f}" if "(%)" in label or "points" in label else f"{value:.2f}"


def markdown_table(values: dict[str, float], over_seeds: dict[str, dict]) -> str:
    """Paper vs the generator, one row per figure (docs/spec.md holds this table verbatim):
    the tolerance, the figure's mean and 5-95% range over seeds (`over_seeds[key]` with
    "mean", "q05", "q95", "inside", "seeds": benchmarks/fit_synthetic.json) and its value on
    one grid (`values`, the shipped seed 0). "mean within" says whether the generator reaches
    the paper in expectation; "seeds within" on how many of the seeds one draw does; "seed 0
    within" whether the shipped draw does."""
    rows = ["| figure | paper | tolerance | mean over seeds | 5–95% over seeds | mean within "
            "| seeds within | seed 0 | seed 0 within |",
            "|---|---:|---|---:|---|---|---:|---:|---|"]
    for key, (label, paper, tol, kind) in FIGURES.items():
        bound = f"≤ paper + {_fmt(key, tol)}" if kind == "max" else f"± {_fmt(key, tol)}"
        s = over_seeds[key]
        mean_ok = within(key, s["mean"])
        ok = values[key] is not None and within(key, values[key])
        rows.append(f"| {label.strip()} | {_fmt(key, paper)} | {bound} | {_fmt(key, s['mean'])} | "
                    f"{_fmt(key, s['q05'])}–{_fmt(key, s['q95'])} | "
                    f"{'yes' if mean_ok else 'NO'} | {s['inside']} of {s['seeds']} | "
                    f"{_fmt(key, values[key])} | "
                    f"{'yes' if ok else 'NO'} |")
    return "\n".join(rows) + "\n"


def parameters_table(params) -> str:
    """The generator's parameters (a SimulationParams) as docs/spec.md lists them."""
    from dataclasses import fields

    rows = ["| parameter | value |", "|---|---:|"]
    rows += [f"| `{f.name}` | {getattr(params, f.name):g} |" for f in fields(params)]
    return "\n".join(rows) + "\n"
