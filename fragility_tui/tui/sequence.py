"""The sequential comparison of issue 45 as the app runs and shows it, apart from the
widgets (tests check it without starting the app).

- The Compare form's "stop when settled" fields (margin, reference, seed, item / second /
  token budgets) are checked here, each problem naming its field, and become the arguments
  of `fragility-tui compare A B --items SRC --grid NAME ...`: the CLI's own live comparison
  (commands/compare_live.py), started as a detached process as the run forms start `run`.
- `live_state`: that comparison followed from the grid's stored cells, never from the
  process's output: its run rows (tagged `compare: {pair, chunk}`) name the item set, the
  sample size and the grid seed, so the pool is the one the process drew; the decision path
  is analysis/sequential.py's over the cells stored so far, which is the process's own path
  (a function of the stored cells, the seed, the chunk and the settings), up to the last
  whole chunk. Budgets of seconds and tokens are read from the same run rows.
- `replay_state`: `compare A B --grid NAME` over the grid's recorded cells (in view).
"""

from __future__ import annotations

from dataclasses import dataclass, field

STARTING, RUNNING, FINISHED, STOPPED = "starting", "running", "finished", "stopped"


@dataclass(frozen=True)
class SequenceSettings:
    """compare's settings the form offers (the rest at the CLI's defaults)."""

    margin: float = 2.0  # points
    reference: str | None = None
    seed: int = 0
    chunk: int = 25
    max_items: int | None = None
    max_seconds: float | None = None
    max_tokens: int | None = None
    target: str = "observed"
    scope: str = "population"

    def argv(self) -> list[str]:
        out = ["--margin", f"{self.margin:g}", "--seed", str(self.seed)]
        if self.chunk != SequenceSettings.chunk:  # the CLI's default left out
            out += ["--chunk", str(self.chunk)]
        for flag, value in (("--reference", self.reference), ("--max-items", self.max_items),
                            ("--max-seconds", self.max_seconds),
                            ("--max-tokens", self.max_tokens)):
            if value is not None:
                out += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
        return out


@dataclass(frozen=True)
class SequencePlan:
    """One `fragility-tui compare` process and the pair the Compare pane follows."""

    grid: str
    a: str  # model A's name in the grid
    b: str
    argv: tuple[str, ...]
    settings: SequenceSettings


def _number(text: str, kind, name: str, problems: list[str], *, low=None, above=None,
            hint: str = ""):
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        problems.append(f"{name}: {text!r} is not {hint or 'a number'}")
        return None
    if value != value or value in (float("inf"), float("-inf")):
        problems.append(f"{name}: {text!r} is not {hint or 'a number'}")
        return None
    if low is not None and value < low:
        problems.append(f"{name}: must be at least {low:g}, got {text}")
        return None
    if above is not None and not value > above:
        problems.append(f"{name}: must be above {above:g}, got {text}")
        return None
    return value


def check_sequence_fields(form: dict) -> tuple[SequenceSettings | None, list[str]]:
    """The form's margin, reference, seed, chunk, max_items, max_seconds, max_tokens (text;
    empty = the CLI's default), checked as `compare` checks its flags; the reference must be
    one of the form's configs when those are given."""
    from fragility_tui.harness.configs import parse_config_list

    problems: list[str] = []
    value = lambda key: str(form.get(key) or "").strip()  # noqa: E731
    margin = _number(value("margin"), float, "margin", problems, low=0)
    if margin is not None and margin >= 100:  # as compare's --margin (commands/flag_checks.py)
        problems.append(f"margin: must be below 100 points, got {value('margin')}")
        margin = None
    seed = _number(value("seed"), int, "seed", problems, hint="a whole number")
    chunk = _number(value("chunk"), int, "chunk", problems, low=1, hint="a whole number")
    max_items = _number(value("max_items"), int, "max items", problems, low=1,
                        hint="a whole number")
    max_seconds = _number(value("max_seconds"), float, "max seconds", problems, above=0)
    max_tokens = _number(value("max_tokens"), int, "max tokens", problems, low=1,
                         hint="a whole number")
    reference = value("reference") or None
    if reference is not None:
        if not _runs(reference):
            problems.append(f"reference: unknown config {reference!r} (e.g. o0.letter, "
                            "cloze_qa, o0.letter.lik)")
        elif value("configs"):
            try:
                configs = parse_config_list(value("configs"))
            except ValueError:
                configs = None  # the configs field's own problem says why
            if configs is not None and reference not in configs:
                problems.append(f"reference: {reference} is not among the configs "
                                f"({', '.join(configs)})")
    if problems:
        return None, problems
    return SequenceSettings(margin=2.0 if margin is None else margin, reference=reference,
                            seed=seed or 0, chunk=chunk or SequenceSettings.chunk,
                            max_items=max_items, max_seconds=max_seconds,
                            max_tokens=max_tokens), []


def compare_argv(spec_a: str, spec_b: str, run_argv: list[str],
                 settings: SequenceSettings) -> list[str]:
    """`fragility-tui compare A B --items ... --grid ...` from the run form's arguments for
    model A (its --items, --grid, --per-benchmark, --configs, --device, --display, --db):
    the shipped starter items named when the form leaves items empty, as `run` defaults."""
    from fragility_tui.store.sample_grids import SAMPLE_GRIDS_DIR

    rest = list(run_argv[1:])
    if "--model" in rest:
        k = rest.index("--model")
        del rest[k:k + 2]
    if "--items" not in rest:
        rest = ["--items", str(SAMPLE_GRIDS_DIR / "starter_items.jsonl")] + rest
    cut = rest.index("--db") if "--db" in rest else len(rest)  # --db last, as run's
    return ["compare", spec_a, spec_b, *rest[:cut], *settings.argv(), *rest[cut:]]


# ---------------------------------------------------------------- what the pane shows
@dataclass
class SequenceState:
    """A sequential comparison at this moment: the path so far and how it stands."""

    a: str
    b: str
    live: bool
    settings: SequenceSettings
    status: str = FINISHED  # starting, running, finished, stopped (live only)
    result: object = None  # analysis.sequential.SequentialResult, None while starting
    note: str = ""  # why it stopped short, or what it waits for
    spent: dict = field(default_factory=dict)  # seconds, tokens, runs (live)
    pool_delta: float | None = None  # the whole pool's Δ at the reference, once all judged
    # the pair's first comparison as recorded (services/comparisons.py), and whether this
    # one is it: False for another seed or reference (not independent evidence)
    first: dict | None = None
    independent: bool = True

    @property
    def stop(self) -> str | None:
        """The stop that ended it ('budget' for a live run stopped by seconds or tokens),
        None while it goes on."""
        r = self.result
        if r is None or (r.stop == "awaiting-cells" and self.status != FINISHED):
            return None
        return r.stop


def _d_and_available(cube, a: str, b: str, uids, configs):
    """d rows (A's bit - B's bit per config) and which pool items have both models' cells in
    every config: compare_live's read of the grid, on the app's cube."""
    import numpy as np

    d = np.zeros((len(uids), len(configs)), dtype=np.int8)
    avail = np.zeros(len(uids), dtype=bool)
    if a not in cube.models or b not in cube.models or \
            any(c not in cube.configs for c in configs):
        return d, avail
    ia, ib = cube.models.index(a), cube.models.index(b)
    cols = [cube.configs.index(c) for c in configs]
    where = {u: k for k, u in enumerate(cube.items)}
    rows = np.array([where.get(u, -1) for u in uids], dtype=np.intp)
    known = np.flatnonzero(rows >= 0)
    present = (cube.present[ia][rows[known]][:, cols] & cube.present[ib][rows[known]][:, cols])
    avail[known] = present.all(axis=1)
    idx = np.flatnonzero(avail)
    r = rows[idx]
    d[idx] = (cube.bits[ia][r][:, cols].astype(np.int8) - cube.bits[ib][r][:, cols].astype(np.int8))
    return d, avail


def _run(d, benchmarks, uids, configs, reference, settings: SequenceSettings, avail):
    from fragility_tui.analysis.sequential import run_sequential

    return run_sequential(d, benchmarks, uids, configs, reference, seed=settings.seed,
                          chunk=settings.chunk, margin=settings.margin / 100,
                          target=settings.target, max_items=settings.max_items,
                          available=avail, scope=settings.scope)


def replay_state(cube, a: str, b: str, settings: SequenceSettings) -> SequenceState:
    """`compare A B --grid NAME`: the decision replayed over the cube's cells in the configs
    the pair has (Cube.pair_configs, as the CLI), against the cube's reference unless the
    settings name one; a reference the pair lacks gives way to the default of its configs."""
    from fragility_tui.harness.configs import default_reference

    cube = cube.pair_configs(a, b)
    configs = list(cube.configs)
    reference = settings.reference or cube.reference
    if reference not in configs:
        reference = default_reference(configs)
    d, avail = _d_and_available(cube, a, b, cube.items, configs)
    result = _run(d, cube.benchmarks, cube.items, configs, reference, settings, avail)
    pool_delta = float(d[:, configs.index(reference)].mean()) if avail.all() and len(d) \
        else None
    return SequenceState(a, b, False, settings, FINISHED, result, pool_delta=pool_delta)


def replay_settings(records: list[dict], reference: str,
                    form: SequenceSettings | None) -> SequenceSettings:
    """What `v` replays a pair with (`records`: the pair's recorded comparisons, the first
    first; `reference`: the view's): the seed, chunk, margin and scope of its recorded
    comparison at this reference, else of its first one, so `v` shows the comparison that
    was run (its chunk too: 12 items in chunks of 25 never narrow); else those of the
    comparison the Compare form started in this grid (`form`: its chunk, margin, seed);
    else compare's defaults."""
    row = ([r for r in records if r["reference"] == reference] or records or [None])[0]
    if row is not None:
        margin = row.get("margin")
        return SequenceSettings(
            margin=SequenceSettings.margin if margin is None else round(100 * margin, 9),
            seed=int(row["seed"]), chunk=int(row.get("chunk") or SequenceSettings.chunk),
            scope=row.get("scope") or SequenceSettings.scope)
    if form is not None:
        return SequenceSettings(margin=form.margin, seed=form.seed, chunk=form.chunk)
    return SequenceSettings()


def comparison_json(state: SequenceState) -> dict | None:
    """compare's JSON of the state, as its record of the first comparison reads it
    (services/comparisons.py); None before a result, or over an empty pool."""
    r = state.result
    if r is None or not r.pool:
        return None
    return {**r.to_json(), "a": state.a, "b": state.b}


def first_comparison_line(state: SequenceState) -> str | None:
    """For a comparison that is not the pair's first in the grid (another seed or
    reference): the first one's verdict, which stands, and that this one is not independent
    evidence: compare's line, shortened to two lines at 80 columns (its date and why left
    to the CLI and the docs); else None."""
    from fragility_tui.services.comparisons import first_verdict

    first = state.first
    if state.independent or first is None:
        return None
    verdict = first_verdict(first["result"], {state.a: "A", state.b: "B"})
    return (f"first comparison (ref {first['reference']}, seed {first['seed']}): {verdict}. "
            "That verdict stands; this one is not independent evidence.")


def comparison_runs(runs, plan: SequencePlan) -> list:
    """The run rows of the plan's comparison (its chunks' runs, every invocation's)."""
    return [r for r in runs if r.grid == plan.grid
            and (r.spec.get("compare") or {}).get("pair") == [plan.a, plan.b]]


def pool_of(spec: dict) -> tuple[list[str], list[str]]:
    """(item ids, benchmarks) of the pool a comparison's run drew: `run --items` sampled
    with the run's sample size and grid seed, as compare_live's prepare reads it."""
    from fragility_tui.items.loaders import load_many

    items, _ = load_many(list(spec["items"]), per_benchmark=spec.get("per_benchmark"),
                         seed=int(spec.get("seed") or 0))
    return [it.item_uid for it in items], [it.benchmark for it in items]


def live_state(cube, plan: SequencePlan, runs: list, pool, exit_code: int | None,
               ) -> SequenceState:
    """The plan's comparison as its stored cells have it. `runs`: comparison_runs; `pool`:
    pool_of one of them (None before the first run row); `exit_code`: the process's exit
    status once it has ended, else None (running, or not known)."""
    from fragility_tui.harness.configs import default_reference

    s = plan.settings
    spent = {"seconds": float(sum(r.seconds or 0.0 for r in runs)),
             "tokens": int(sum(r.tokens or 0 for r in runs)), "runs": len(runs)}
    if pool is None or not runs:
        status = STOPPED if exit_code is not None else STARTING
        note = (f"the process ended (exit status {exit_code}) before its first run: the "
                "Runs pane's note and log say why" if exit_code is not None else
                "preparing both models and the first chunk")
        return SequenceState(plan.a, plan.b, True, s, status, None, note, spent)
    uids, benchmarks = pool
    asked = list(runs[0].spec.get("configs") or [])
    configs = []
    if cube is not None and plan.a in cube.models and plan.b in cube.models:
        # a config either model refuses (prepare_models) has none of its cells, and
        # compare leaves it out of view
        has = (cube.present[cube.models.index(plan.a)].any(axis=0)
               & cube.present[cube.models.index(plan.b)].any(axis=0))
        configs = [c for c in asked if c in cube.configs and has[cube.configs.index(c)]]
    configs = configs or asked  # nothing stored yet: every item waits
    reference = s.reference or default_reference(configs)
    if cube is None:
        import numpy as np

        d = np.zeros((len(uids), len(configs)), dtype=np.int8)
        avail = np.zeros(len(uids), dtype=bool)
    else:
        d, avail = _d_and_available(cube, plan.a, plan.b, uids, configs)
    result = _run(d, benchmarks, uids, configs, reference, s, avail)
    state = SequenceState(plan.a, plan.b, True, s, FINISHED, result, spent=spent)
    if result.items_used == result.pool and result.pool:
        state.pool_delta = float(d[:, configs.index(reference)].mean())
    if result.stop != "awaiting-cells":
        return state  # settled, the pool's end or --max-items: as the process decides
    chunk = len(result.path) + 1
    if exit_code is None:
        state.status, state.note = RUNNING, f"chunk {chunk} being evaluated"
        return state
    if exit_code == 0:  # the process stopped before a chunk: a budget of seconds or tokens
        for flag, key, limit in (("max-seconds", "seconds", s.max_seconds),
                                 ("max-tokens", "tokens", s.max_tokens)):
            if limit is not None and spent[key] >= limit:
                result.stop, result.budget = "budget", flag
                return state
    state.status = STOPPED
    state.note = (f"the process ended (exit status {exit_code}) before chunk {chunk}: the "
                  "Runs pane shows its runs; the same settings again resume it")
    return state


def points(x) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def verdict_line(state: SequenceState) -> str:
    """'verdict: winner A (settled); 100 of 265 items used, 62% of the pool saved', or how
    it stands. The items in compare's words (services/comparisons.items_used): "saved" only
    for a settled verdict of a live comparison, never for a replay (`v` spent nothing) nor
    for a budget, the pool's end or a process that stopped short."""
    from fragility_tui.analysis.sequential import verdict_head
    from fragility_tui.services.comparisons import items_used

    r = state.result
    if r is None:
        return f"{state.status}: {state.note}"
    used, pool = r.items_used, r.pool
    stop = state.stop
    if stop is None:
        last = r.final
        so_far = "" if last is None else (f": Δ̂ {points(last.delta)} "
                                          f"[{points(last.lower)}, {points(last.upper)}]")
        what = "running" if state.status == RUNNING else "waiting"
        if state.status == STOPPED:
            what = "stopped"
        return f"{what}, open after {used} of {pool} items{so_far} · {state.note}"
    head = verdict_head(r.winner, r.settled, stop, state.settings.margin, r.scope, ("A", "B"))
    why = {"winner": "settled", "equivalent": "settled",
           "budget": f"budget: {r.budget or 'max-items'} spent",
           "pool-exhausted": "pool exhausted",
           "awaiting-cells": "the next chunk's cells are not in the grid"}[stop]
    return f"verdict: {head} ({why}); {items_used(used, pool, stop, not state.live)}"


def settings_line(state: SequenceState) -> str:
    r, s = state.result, state.settings
    ref = r.reference if r is not None else (s.reference or "default")
    pool = f" · pool {r.pool}" if r is not None else ""
    return (f"ref {ref} · margin ±{s.margin:g} · seed {s.seed} · chunk {s.chunk}{pool}")


def path_rows(state: SequenceState) -> list[list]:
    """The path table: per chunk the items done, Δ̂ and its sequence (points), the reading
    of the stopping rule."""
    from fragility_tui.analysis.sequential import settled

    r = state.result
    if r is None:
        return []
    return [[st.items, None if st.delta is None else 100 * st.delta, 100 * st.lower,
             100 * st.upper, settled(st.delta, st.lower, st.upper, r.margin) or "open"]
            for st in r.path]


def _runs(config_id: str) -> bool:
    """Whether our runner renders this config (the paper set, .lik, with modifiers)."""
    from fragility_tui.harness.configs import get_config

    try:
        get_config(config_id)
    except KeyError:
        return False
    return True
