"""The lines `fragility-tui compare` prints (the replay and the live comparison alike): the
header, one progress line per chunk, the verdict."""

from __future__ import annotations


def points(value) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f}"


def seq(lo, hi) -> str:
    return f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"


def alpha_words(alpha: float, decision: float, target: str) -> str:
    """The header's alpha: the decision's level and the readings that are exploratory
    (issue 58: outside the decision's alpha, analysis/sequential.py)."""
    other = "balanced" if target == "observed" else "observed"
    return (f"alpha {alpha:g} (decision {decision:g}; exploratory readings: the {other} "
            f"target, the other configs)")


def other_words(target: str) -> str:
    """The other target's label on a progress line: an exploratory reading."""
    return f"{'balanced' if target == 'observed' else 'observed'} (exploratory)"


def reversed_words(configs) -> str:
    return f"  reversed by {', '.join(configs)} (exploratory)"


def header_line(args, a: str, b: str, result, source: str, n_configs: int) -> str:
    a_split = result.alphas
    return (f"compare {a} vs {b} on {args.grid} ({source}): reference "
            f"{result.reference}, {result.target} target, {result.scope} scope, "
            f"margin {args.margin:g} points, "
            f"{alpha_words(result.alpha, a_split['decision'], result.target)}, "
            f"seed {result.seed}, chunk {result.chunk}, "
            f"pool {result.pool} items, {n_configs} configs")


def progress_line(step, result) -> str:
    """One chunk: items done, Δ̂ and its sequence, the other target's (exploratory), the
    decision so far (the stopping rule's reading of this chunk) and any harness-sensitive
    configs (exploratory)."""
    from fragility_tui.analysis.sequential import settled

    state = settled(step.delta, step.lower, step.upper, result.margin) or "open"
    line = (f"  {step.items:>5}/{result.pool}  Δ̂ {points(step.delta)}  sequence "
            f"{seq(step.lower, step.upper)}  {other_words(result.target)} "
            f"{points(step.other_delta)} "
            f"{seq(step.other_lower, step.other_upper)}  decision: {state}")
    if step.harness_sensitive:
        line += reversed_words(step.harness_sensitive)
    return line


def reading(step: dict, margin: float) -> str:
    from fragility_tui.analysis.sequential import settled

    return settled(step["delta"], step["lower"], step["upper"], margin) or "open"


def verdict(out: dict, args) -> str:
    from fragility_tui.analysis.sequential import verdict_head
    from fragility_tui.services.comparisons import items_used

    used, pool, stop = out["items_used"], out["pool"], out["stop"]
    last = out["path"][-1] if out["path"] else None
    saved = items_used(used, pool, stop, out["replay"])  # "saved" only for a live verdict
    text = verdict_head(out["winner"], out["settled"], stop, args.margin, out["scope"],
                        (out["a"], out["b"]))
    reason = {"winner": "settled", "equivalent": "settled",
              "budget": f"the budget (--{out.get('budget') or 'max-items'}) is spent",
              "pool-exhausted": "every item of the pool used",
              "awaiting-cells": "the next chunk's cells are not in the grid (yet)"}[stop]
    lines = [f"verdict: {text} ({stop}: {reason}); {saved}"]
    if last is not None:
        lines.append(f"  at the stop: Δ̂ {points(last['delta'])} points, sequence "
                     f"{seq(last['lower'], last['upper'])}"
                     + (f"; the whole pool's Δ is {points(out['pool_delta'])}"
                        if out["pool_delta"] is not None else ""))
        if last["harness_sensitive"]:
            lines.append("  harness-sensitive (exploratory): "
                         + ", ".join(last["harness_sensitive"])
                         + " support the opposite winner (the other configs' sequences, "
                         "together at alpha/4, outside the decision's alpha)")
    if not out["replay"]:
        if out["seconds_used"] is not None:
            lines.append(f"  cost (the comparison's runs, as recorded): "
                         f"{out['seconds_used']:.0f} s and {out['tokens_used']} tokens"
                         + ("" if out["seconds_pool"] is None else
                            f"; the whole pool at the same rate: "
                            f"{out['seconds_pool']:.0f} s"))
    elif out["seconds_per_item"] is not None:
        lines.append(f"  cost (estimated from the runs' recorded seconds): "
                     f"{out['seconds_used']:.0f} s against {out['seconds_pool']:.0f} s for "
                     f"the whole pool ({out['seconds_per_item']:.2f} s per item for the pair)")
    return "\n".join(lines)


def pool_delta(column, benchmarks, target: str) -> float:
    """The pool's exact Δ from its d column: the mean over items (observed target) or the
    mean of the benchmarks' means (balanced: every benchmark weighs the same)."""
    import numpy as np

    column = np.asarray(column, dtype=float)
    if target != "balanced":
        return float(column.mean())
    names = np.asarray([str(b) for b in benchmarks], dtype=object)
    return float(np.mean([column[names == n].mean() for n in sorted(set(names.tolist()))]))
