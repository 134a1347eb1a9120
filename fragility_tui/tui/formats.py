"""Small number formats shared by the panes (numpy-free, imported before the first frame)."""

from __future__ import annotations

import math

from rich.text import Text

from fragility_tui.analysis.decision_words import lacking_benchmarks


def pct(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{100 * value:.{digits}f}"


def num(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def decision_reason(d: dict) -> str:
    """Why a decision (SPEC §9, the JSON of analysis.decisions) got its label, in words:
    a label with no why (`underpowered` beside Δ̂ +0.0) reads as a bug."""
    label, m = d.get("label"), d.get("margin_points") or 0.0
    delta, ci = d.get("delta"), d.get("ci")
    if label == "unsupported":
        n_items = {b["benchmark"]: b["n_items"] for b in d.get("per_benchmark") or []}
        return lacking_benchmarks(d.get("unsupported_benchmarks") or [], n_items)
    if label == "harness-sensitive":
        return ("under " + ", ".join((d.get("harness_configs") or [])[:4]) + " the other "
                "model wins, with a simultaneous 95% interval excluding 0 and |Δ̂| ≥ the margin")
    if label == "underpowered":
        why = []
        if delta is None:
            why.append("Δ̂ undefined")
        if ci and ci[0] <= 1e-12 and ci[1] >= -1e-12:
            why.append(f"the 95% CI [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}] includes 0")
        if delta is not None and abs(100 * delta) < m - 1e-9:
            why.append(f"|Δ̂| {abs(100 * delta):.1f} < margin m = {m:g} pts")
        return " and ".join(why) or "the interval includes 0 or |Δ̂| < m"
    if label == "target-sensitive":
        other = d.get("other_target_delta")
        moved = "" if other is None else f" (Δ̂ {100 * other:+.1f} pts there)"
        return f"the other target reverses Δ̂ or moves it by more than m{moved}"
    if label == "stable":
        return "CI excludes 0, |Δ̂| ≥ m, no config or target supports the other winner"
    return ""


def verdict_reason(p: dict) -> str:
    """Why a pair's gap-split verdict (SPEC §6) is what it is: it is about the stable set S
    (items robust for both models), not about the reference gap Δ."""
    a, b, s = p.get("a_only_stable", 0), p.get("b_only_stable", 0), p.get("stable_items", 0)
    gap = p.get("gap")
    text = {"identical": f"no item of the stable set (|S| = {s}) separates them: "
                         f"A only {a}, B only {b}; the gap Δ = {gap} lies outside S",
            "one item": f"one item of the stable set (|S| = {s}) separates them",
            "cancel": f"stable items favour both (A only {a}, B only {b}) and cancel "
                      f"(|stable gap| ≤ 1)",
            "differs": f"the stable items differ: A only {a}, B only {b} "
                       f"(stable gap {p.get('stable_gap')} of Δ = {gap})"}.get(p.get("verdict"), "")
    # a report before SPEC v4 has no support: its manufactured flag says as much
    support = p.get("support") or ("manufactured" if p.get("manufactured") else None)
    if support == "manufactured":
        text += (f"; manufactured: Δ ≠ 0 but McNemar on {a} vs {b} gives p ≥ 0.05 "
                 "(the stable set supports no order)")
    elif support == "reversed":
        text += (f"; reversed: McNemar on {a} vs {b} gives p < 0.05 with the stable set "
                 f"ordering the pair against Δ = {gap} (the leaderboard gap is the harness's)")
    elif support == "supported":
        text += f"; supported: McNemar on {a} vs {b} gives p < 0.05 in Δ's direction"
    return text


SHARE_TOL = 1e-9  # a pooled share of exactly 1 may come out as 1.0000000000000002


def share_words(share: float | None) -> str:
    """A fragile share in percent; outside 0–100 % it says why in words (SPEC §6 v4: the
    stable set leans against the gap), never a bare percentage above 100."""
    if share is None:
        return "—"
    if share > 1 + SHARE_TOL:
        return f"{100 * share:.1f} % (over 100: the stable items lean against the gap)"
    if share < -SHARE_TOL:
        return f"{100 * share:.1f} % (below 0: the stable items exceed the gap)"
    return f"{100 * share:.1f} %"


def share_cell(share: float | None) -> Text:
    """The table's cell of a fragile share, in percent, marked where it leaves 0–100."""
    if share is None:
        return Text("—", justify="right", style="dim")
    outside = not -SHARE_TOL <= share <= 1 + SHARE_TOL
    return Text(f"{100 * share:.1f}" + (" !" if outside else ""), justify="right",
                style="bold red" if outside else "")
