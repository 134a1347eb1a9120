"""No seed shopping (issue 58): `compare` and the app's sequence view record the first
comparison of each (pair, reference, target) in a grid with its seed (store/comparisons.py)
and say, for any later one with another seed or reference, that the first one's verdict
stands and this one is not independent evidence. A service, below the commands and the app,
so both record and read it with the same functions (the app without importing a command).

Why: the population scope's guarantee (a wrong winner with probability at most α, the
decision's level) is over the draw of the item order for one comparison chosen in advance.
Another `--seed` on the same grid is another order of the same cells; another `--reference`
after reading `report` is a choice made after seeing the answers. Running either until one
settles is many looks at one grid, and their errors add up beyond α. The record cannot stop
anyone; it makes the first verdict the one every later run reports beside its own.
"""

from __future__ import annotations

import sys

from fragility_tui.store.comparisons import same_comparison


def summary(out: dict) -> dict:
    """What the record keeps of a comparison's result (out: compare's JSON)."""
    last = out["path"][-1] if out["path"] else None
    winner = None
    if out["winner"]:
        winner = out["a"] if out["winner"] > 0 else out["b"]
    return {"stop": out["stop"], "settled": out["settled"], "winner": winner,
            "items_used": out["items_used"], "pool": out["pool"],
            "delta": None if last is None else last["delta"],
            "lower": None if last is None else last["lower"],
            "upper": None if last is None else last["upper"],
            "margin_points": out["margin"] * 100, "scope": out["scope"]}


def record(store, grid: str, settings: dict, result: dict | None) -> None:
    """Record (or continue) this comparison; a store that cannot be written keeps none."""
    from fragility_tui.store.connection import StoreReadOnly

    try:
        store.record_comparison(grid, result=result, **settings)
    except StoreReadOnly:
        pass


def settings_of(out: dict, live: bool) -> dict:
    return {"a": out["a"], "b": out["b"], "reference": out["reference"],
            "target": out["target"], "seed": int(out["seed"]), "scope": out["scope"],
            "margin": float(out["margin"]), "chunk": int(out["chunk"]), "live": live}


def first_comparison(store, grid: str, out: dict, live: bool) -> dict:
    """Record this comparison and add to `out` (compare's JSON) `first_comparison` (the
    pair's first comparison under this target, as recorded: its reference, seed, when, and
    its verdict) and `independent_evidence` (False when this one is not that first one).
    Called at the start of a live comparison (result None: a killed run still counts as the
    first) and again with its result."""
    settings = settings_of(out, live)
    record(store, grid, settings, summary(out) if out.get("path") is not None else None)
    return read_first(store, grid, out, live)


SETTINGS = ("seed", "scope", "margin", "chunk")  # with the reference: which comparison


def read_first(store, grid: str, out: dict, live: bool) -> dict:
    """`first_comparison`'s reading without its record: for a comparison another process
    records (the app following the live `compare` it started)."""
    settings = settings_of(out, live)
    rows = store.comparisons(grid, out["a"], out["b"], out["target"])
    first = rows[0] if rows else {**settings, "result": None, "created_at": None}
    is_first = first["reference"] == out["reference"] and same_comparison(
        [first[k] for k in SETTINGS], [settings[k] for k in SETTINGS])
    out["first_comparison"] = {k: first[k] for k in (
        "a", "b", "reference", "target", "seed", "scope", "margin", "chunk", "live",
        "created_at", "result")}
    out["independent_evidence"] = is_first
    return out


def first_verdict(result: dict | None, names: dict | None = None) -> str:
    """The first comparison's recorded verdict in words; `names` renames its winner (the
    app's "A" / "B" for the pair it shows)."""
    if result is None:
        return "no verdict recorded (it was stopped before its first chunk was judged)"
    if result["winner"]:
        verdict = f"winner {(names or {}).get(result['winner'], result['winner'])}"
    elif result["settled"] == "equivalent" or result["stop"] == "equivalent":
        verdict = f"equivalent within ±{result['margin_points']:g} points"
    else:
        verdict = f"not settled ({result['stop'].replace('-', ' ')})"
    return verdict + f" after {result['items_used']} of {result['pool']} items"


def items_used(used: int, pool: int, stop: str | None, replay: bool) -> str:
    """'100 of 265 items used', with ', 62% of the pool saved' only where a live comparison
    stopped on its verdict (winner, equivalent): a replay spent nothing, and a budget, the
    pool's end or a wait for cells is no saving (issue 58). `compare`'s verdict line and the
    app's sequence view say it with this one function."""
    text = f"{used} of {pool} items used"
    if not replay and stop in ("winner", "equivalent") and pool:
        text += f", {100 * (1 - used / pool):.0f}% of the pool saved"
    return text


def first_line(out: dict) -> str | None:
    """The printed line for a comparison that is not the pair's first, else None."""
    if out.get("independent_evidence", True):
        return None
    first = out["first_comparison"]
    verdict = first_verdict(first["result"])
    when = f" on {first['created_at'][:10]}" if first.get("created_at") else ""
    differs = ", ".join(f"{k} {_setting(k, out[k])} (first: {_setting(k, first[k])})"
                        for k in ("reference", *SETTINGS)
                        if _setting(k, out[k]) != _setting(k, first[k]))
    return (f"first comparison: this pair ({first['target']} target) was first compared in "
            f"this grid at reference {first['reference']}, seed {first['seed']}{when}: "
            f"{verdict}. That verdict stands; this one ({differs}) reads the same cells again "
            "and is not independent evidence: its error is not bounded by alpha on its "
            "own")


def _setting(key: str, value) -> str:
    return f"±{100 * float(value):g} points" if key == "margin" else str(value)


def print_first_line(out: dict, stream=None) -> None:
    line = first_line(out)
    if line is not None:
        (stream or sys.stdout).write(line + "\n")
