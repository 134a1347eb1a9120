"""Sequential pairwise comparison (issue 45): anytime-valid confidence sequences for the
paired accuracy difference of two models over a finite item pool, and the stopping rule.

Items are drawn in a seeded random order without replacement; after every chunk of items
each sequence is updated, and the comparison stops as soon as it is settled. The method
(docs/spec.md, "Sequential comparisons"):

- Per item and config, d = bit_A - bit_B in {-1, 0, 1}, mapped to x = (d + 1) / 2 in [0, 1].
  The pool's mean of x is (Δ + 1) / 2 with Δ the pool's paired accuracy difference.
- Betting confidence sequences for sampling without replacement (analysis/betting_cs.py:
  the capital, its bets and their guarantee).
- Scope. The sequence above ("pool") is about the pool's own Δ: exact once every item is
  drawn. The default ("population") is about the population of items the pool stands for
  (SPEC §9's bootstrap treats items the same way): the pool's items in a uniformly random
  order are draws from it, so the same capital with mu(m) = m, the with-replacement betting
  sequence of Waudby-Smith & Ramdas (JRSS-B 2024), covers the population's Δ at any
  stopping time; it never collapses to a point, so two models that differ only by the
  pool's luck are not called different at the pool's end.
- Strata: the balanced target (every benchmark weighs the same) is a weighted sum of the
  benchmarks' own pool means; each benchmark gets its own sequence (its items reach it in
  a uniformly random order whatever the interleaving, which never looks at the answers) at
  its share of alpha, and the target's bounds are the weighted sums of theirs. The observed
  target uses one sequence over the whole pool when the order is uniformly random, and the
  same per-benchmark construction (weights N_b / N) when the order is stratified.
- Alpha (issue 58). The decision's sequence (the lead target at the reference config), the
  only one the stopping rule reads, gets the whole alpha: with probability at least
  1 - alpha it covers its Δ at every chunk, so a declared winner has the wrong sign with
  probability at most alpha. The readings are exploratory, outside that alpha: the other
  configs in view share alpha/4 evenly (the harness-sensitive reading: together they hold
  with probability at least 1 - alpha/4) and the other target at the reference gets
  alpha/4, their levels before issue 58; every sequence at once holds with probability at
  least 1 - 3 alpha/2 (union bound). Until issue 58 the decision got alpha/2 so that every
  sequence held at once at 1 - alpha; the simulations (benchmarks/sequential_sim.py
  --issue58) measured what that cost: a 5-point gap at 25% discordance settled on a median
  33% of a 3,679-item pool; 27% with the whole alpha, 22% with the growth bet's prior draws
  and the zoomed grid too (analysis/betting_cs.py), while with no difference a winner is
  named in 3.0% of runs and the sequence covers in 97.0% (docs/spec.md, "Settle sooner").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fragility_tui.analysis.betting_cs import GRID_POINTS, WorBettingCS  # noqa: F401

TOL = 1e-9
SCOPES = ("population", "pool")
STOPS = ("winner", "equivalent", "budget", "pool-exhausted", "awaiting-cells")
BUDGETS = ("max-items", "max-seconds", "max-tokens")
_ORDER_STREAM = 45  # the item order's random stream (issue 45), separate from bootstraps


def item_order(benchmarks, item_ids, seed: int, stratified: bool) -> np.ndarray:
    """Seeded order of the pool (indices into item_ids), without replacement. Uniform: one
    permutation of the items sorted by id. Stratified: a permutation within each benchmark,
    interleaved so each benchmark's k-th item sits at position (k + 1/2) / N_b of the run
    (ties by benchmark name): every prefix holds each benchmark in proportion."""
    benchmarks = np.asarray([str(b) for b in benchmarks], dtype=object)
    ids = np.asarray([str(i) for i in item_ids], dtype=object)
    rng = np.random.default_rng([_ORDER_STREAM, int(seed)])
    by_id = np.argsort(ids, kind="stable")
    if not stratified:
        return by_id[rng.permutation(len(ids))]
    keys, parts = [], []
    for b_rank, name in enumerate(sorted(set(benchmarks.tolist()))):
        members = by_id[benchmarks[by_id] == name]
        members = members[rng.permutation(len(members))]
        frac = (np.arange(len(members)) + 0.5) / len(members)
        keys.append(np.column_stack([frac, np.full(len(members), b_rank)]))
        parts.append(members)
    key = np.concatenate(keys)
    order = np.lexsort((key[:, 1], key[:, 0]))
    return np.concatenate(parts)[order]


DECISION_SHARE = 1.0  # the decision's alpha as a share of alpha (1/2 until issue 58)
READINGS = ("harness_sensitive", "other_target")  # exploratory: outside the decision's alpha


def split_alpha(alpha: float, n_other_configs: int) -> dict:
    """The sequences' levels: the decision alpha (the only sequence the stopping rule reads;
    DECISION_SHARE of it), each other config alpha/4/(C-1), the other target alpha/4. The
    last two are exploratory readings outside the decision's alpha: the other configs hold
    together with probability >= 1 - alpha/4, the other target with >= 1 - alpha/4, every
    sequence at once with >= 1 - 3 alpha/2 (union bound)."""
    return {"decision": alpha * DECISION_SHARE,
            "per_other_config": alpha / 4 / n_other_configs if n_other_configs else 0.0,
            "other_target": alpha / 4}


def guarantee(alphas: dict, n_other_configs: int) -> dict:
    """What the levels cover, for the JSON: the decision's alpha, the exploratory readings'
    own levels, and every sequence at once (the union bound)."""
    others = alphas["per_other_config"] * n_other_configs
    return {"decision_alpha": alphas["decision"],
            "exploratory": list(READINGS),
            "harness_sensitive_alpha": others,
            "other_target_alpha": alphas["other_target"],
            "simultaneous_alpha": alphas["decision"] + others + alphas["other_target"]}


@dataclass
class _Target:
    """How one target's sequence is built from rows of the CS: weights over strata rows, or
    one pooled row."""

    name: str
    rows: np.ndarray  # row per stratum (stratified) or a single pooled row
    weights: np.ndarray  # weight of each row's mean
    row_of_stratum: np.ndarray | None  # [S] -> row (None when pooled)


@dataclass(frozen=True)
class Step:
    items: int
    delta: float | None
    lower: float
    upper: float
    other_delta: float | None
    other_lower: float
    other_upper: float
    harness_sensitive: tuple[str, ...]

    def to_json(self) -> dict:
        return {"items": self.items, "delta": self.delta, "lower": self.lower,
                "upper": self.upper, "other_target": {"delta": self.other_delta,
                                                      "lower": self.other_lower,
                                                      "upper": self.other_upper,
                                                      "exploratory": True},
                "harness_sensitive": list(self.harness_sensitive),
                "harness_sensitive_exploratory": True}


@dataclass
class SequentialResult:
    stop: str
    winner: int | None  # +1: A, -1: B, None
    items_used: int
    pool: int
    target: str
    reference: str
    margin: float
    alpha: float
    alphas: dict
    seed: int
    chunk: int
    order: np.ndarray
    path: list[Step] = field(default_factory=list)
    settled: str | None = None  # winner / equivalent at the last check, else None
    scope: str = "population"
    configs: dict = field(default_factory=dict)  # config -> (delta, lower, upper)
    budget: str | None = None  # stop 'budget': max-items, max-seconds or max-tokens
    levels: dict = field(default_factory=dict)  # guarantee(): what the alphas cover

    @property
    def final(self) -> Step | None:
        return self.path[-1] if self.path else None

    def to_json(self) -> dict:
        return {"stop": self.stop, "settled": self.settled, "winner": self.winner,
                "items_used": self.items_used,
                "pool": self.pool, "share_saved": 1.0 - self.items_used / self.pool,
                "scope": self.scope, "target": self.target, "reference": self.reference,
                "margin": self.margin,
                "alpha": self.alpha, "alpha_split": self.alphas,
                "guarantee": self.levels,
                "seed": self.seed,
                "chunk": self.chunk, "budget": self.budget,
                "path": [s.to_json() for s in self.path],
                "configs": {c: {"delta": d, "lower": lo, "upper": hi}
                            for c, (d, lo, hi) in self.configs.items()}}


def settled(delta: float | None, lower: float, upper: float, margin: float) -> str | None:
    """'winner' (the sequence excludes zero and |Δ̂| >= m), 'equivalent' (it lies inside
    [-m, m]) or None."""
    if delta is not None and ((lower > TOL and delta >= margin - TOL)
                              or (upper < -TOL and delta <= -margin + TOL)):
        return "winner"
    if lower >= -margin - TOL and upper <= margin + TOL:
        return "equivalent"
    return None


def verdict_head(winner: int, settled_as: str | None, stop: str, margin: float, scope: str,
                 names: tuple[str, str]) -> str:
    """The comparison's verdict in words, as `compare` and the app's Compare pane say it:
    'winner NAME', 'equivalent within ±m points' (either 'on this pool' in pool scope) or
    'not settled'. winner: +1 for names[0], -1 for names[1], 0 for none."""
    where = " on this pool" if scope == "pool" else ""
    if winner:
        return f"winner {names[0] if winner > 0 else names[1]}{where}"
    if settled_as == "equivalent" or stop == "equivalent":
        return f"equivalent within ±{margin:g} points{where}"
    return "not settled"


class SequentialComparison:
    """The sequences of one pair over a pool of items: d[i, c] in {-1, 0, 1} for configs
    (the reference among them), benchmark per item. Feed items with `add(indices)`; read the
    state with `step()`; `run` drives it over a seeded order chunk by chunk."""

    def __init__(self, d, benchmarks, configs, reference: str, *, target: str = "observed",
                 alpha: float = 0.05, stratified: bool | None = None,
                 points: int = GRID_POINTS, scope: str = "population"):
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}")
        self.scope = scope
        self.d = np.asarray(d, dtype=np.int8)
        if self.d.ndim != 2 or self.d.shape[1] != len(configs):
            raise ValueError("d must be [items, configs]")
        if target not in ("observed", "balanced"):
            raise ValueError(f"unknown target {target!r}")
        self.configs = tuple(configs)
        self.ref = self.configs.index(reference)
        self.target = target
        self.other = "balanced" if target == "observed" else "observed"
        self.stratified = (target == "balanced") if stratified is None else stratified
        names = sorted(set(str(b) for b in benchmarks))
        self.strata = np.array([names.index(str(b)) for b in benchmarks], dtype=np.intp)
        sizes = np.bincount(self.strata, minlength=len(names))
        self.sizes, self.n_items = sizes, len(self.strata)
        self.alphas = split_alpha(alpha, len(self.configs) - 1)
        self.levels = guarantee(self.alphas, len(self.configs) - 1)
        self.alpha = alpha
        n_pool, alphas, self._slot = [], [], {}

        def add_target(key, level, tname):
            weights_b = (np.full(len(names), 1 / len(names)) if tname == "balanced"
                         else sizes / sizes.sum())
            if tname == "observed" and not self.stratified:
                self._slot[key] = _Target(tname, np.array([len(n_pool)]), np.ones(1), None)
                n_pool.append(self.n_items)
                alphas.append(level)
                return
            rows = np.arange(len(n_pool), len(n_pool) + len(names))
            n_pool.extend(sizes.tolist())
            alphas.extend([level / len(names)] * len(names))
            self._slot[key] = _Target(tname, rows, weights_b, rows)

        add_target(("lead", self.ref), self.alphas["decision"], target)
        for c in range(len(self.configs)):
            if c != self.ref:
                add_target(("lead", c), self.alphas["per_other_config"], target)
        add_target(("other", self.ref), self.alphas["other_target"], self.other)
        self.cs = WorBettingCS(n_pool, alphas, points, finite=scope == "pool")
        self._sum = np.zeros((len(names), len(self.configs)))
        self._count = np.zeros(len(names), dtype=np.int64)
        self.used = 0

    def add(self, indices) -> None:
        for i in np.asarray(indices, dtype=np.intp).tolist():
            b = self.strata[i]
            rows, cols = [], []
            for (_, c), tgt in self._slot.items():
                rows.append(tgt.rows[0] if tgt.row_of_stratum is None
                            else tgt.row_of_stratum[b])
                cols.append(c)
            self.cs.update(np.array(rows), (self.d[i, cols] + 1) / 2.0)
            self._sum[b] += self.d[i]
            self._count[b] += 1
            self.used += 1

    def _estimate(self, tname: str, c: int) -> float | None:
        if tname == "observed":
            return float(self._sum[:, c].sum() / self.used) if self.used else None
        if np.any(self._count == 0):
            return None
        return float(np.mean(self._sum[:, c] / self._count))

    def sequence(self, key) -> tuple[float | None, float, float]:
        """(Δ̂, lower, upper) of one sequence, in accuracy (fraction) units."""
        lo_x, hi_x = self.cs.bounds()
        tgt = self._slot[key]
        lo = float(np.dot(tgt.weights, 2 * lo_x[tgt.rows] - 1))
        hi = float(np.dot(tgt.weights, 2 * hi_x[tgt.rows] - 1))
        return self._estimate(tgt.name, key[1]), lo, hi

    def step(self, margin: float) -> Step:
        delta, lo, hi = self.sequence(("lead", self.ref))
        o_delta, o_lo, o_hi = self.sequence(("other", self.ref))
        flipped = []
        if delta is not None and delta != 0:
            for c, name in enumerate(self.configs):
                if c == self.ref:
                    continue
                dc, lc, uc = self.sequence(("lead", c))
                if dc is not None and abs(dc) >= margin - TOL and (
                        (delta > 0 and uc < -TOL) or (delta < 0 and lc > TOL)):
                    flipped.append(name)
        return Step(self.used, delta, lo, hi, o_delta, o_lo, o_hi, tuple(flipped))

    def config_sequences(self) -> dict:
        return {name: self.sequence(("lead", c)) for c, name in enumerate(self.configs)}


class SequentialRun:
    """One sequential comparison driven chunk by chunk: the seeded order, the sequences and
    the path. `advance(available)` judges every whole chunk (or the pool's last one) whose
    items all have their cells, stopping when settled; the caller (a replay, or the live
    runner in commands/compare_live.py) fills `d` rows as cells arrive (`set_row`) and calls
    it again. The path is a function of the cells, the seed, the chunk and the settings
    only, so a run that is killed and rerun over the same cells follows the same path."""

    def __init__(self, d, benchmarks, item_ids, configs, reference: str, *, seed: int = 0,
                 chunk: int = 50, margin: float = 0.02, alpha: float = 0.05,
                 target: str = "observed", max_items: int | None = None,
                 points: int = GRID_POINTS, scope: str = "population"):
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        self.comp = SequentialComparison(d, benchmarks, configs, reference, target=target,
                                         alpha=alpha, points=points, scope=scope)
        self.order = item_order(benchmarks, item_ids, seed, self.comp.stratified)
        self.pool = len(self.order)
        self.limit = self.pool if max_items is None else min(self.pool, max_items)
        self.chunk, self.margin = chunk, margin
        self.result = SequentialResult("pool-exhausted", None, 0, self.pool, target,
                                       reference, margin, alpha, self.comp.alphas, seed,
                                       chunk, self.order, scope=scope,
                                       levels=self.comp.levels)
        self.done = False

    def set_row(self, index: int, row) -> None:
        """The cells of item `index` (d over the configs), before it is judged."""
        self.comp.d[index] = np.asarray(row, dtype=np.int8)

    def next_chunk(self) -> np.ndarray:
        """Indices of the next chunk to judge (empty once the run has stopped or the item
        budget is reached)."""
        if self.done:
            return self.order[:0]
        used = self.comp.used
        return self.order[used:min(used + self.chunk, self.limit)]

    def advance(self, available) -> list[Step]:
        """Judge whole chunks while their items are available; the new steps."""
        avail = np.asarray(available, dtype=bool)
        comp, new = self.comp, []
        while not self.done and comp.used < self.limit:
            nxt = self.next_chunk()
            if not avail[nxt].all():
                break
            comp.add(nxt)
            st = comp.step(self.margin)
            self.result.path.append(st)
            new.append(st)
            verdict = settled(st.delta, st.lower, st.upper, self.margin)
            if verdict is not None or comp.used >= self.pool:
                # the whole pool drawn: in the pool scope the sequence is the pool's exact
                # Δ, always settled; the stop says the pool ran out, `settled` what the last
                # check shows
                self.stop("pool-exhausted" if comp.used >= self.pool else verdict)
                self.result.settled = verdict
                if verdict == "winner":
                    self.result.winner = 1 if st.delta > 0 else -1
        if not self.done and comp.used >= self.limit:
            self.stop("pool-exhausted" if comp.used >= self.pool else "budget",
                      budget="max-items" if comp.used < self.pool else None)
        return new

    def stop(self, reason: str, budget: str | None = None) -> SequentialResult:
        """End the run here (a settled check, the pool's end, a budget, or awaiting-cells)."""
        self.done = reason != "awaiting-cells"
        self.result.stop = reason
        self.result.budget = budget if reason == "budget" else None
        self.result.items_used = self.comp.used
        self.result.configs = self.comp.config_sequences() if self.comp.used else {}
        return self.result


def run_sequential(d, benchmarks, item_ids, configs, reference: str, *, seed: int = 0,
                   chunk: int = 50, margin: float = 0.02, alpha: float = 0.05,
                   target: str = "observed", max_items: int | None = None,
                   available=None, points: int = GRID_POINTS,
                   scope: str = "population") -> SequentialResult:
    """Replay the sequential decision over a pool chunk by chunk in the seeded order.
    `available[i]` False marks an item whose cells are not there yet: the run stops before
    the first chunk holding one ('awaiting-cells'), as a live run waits for them; only whole
    chunks (or the pool's last one) are judged, so a rerun after more cells arrive follows
    the same path."""
    run = SequentialRun(d, benchmarks, item_ids, configs, reference, seed=seed, chunk=chunk,
                        margin=margin, alpha=alpha, target=target, max_items=max_items,
                        points=points, scope=scope)
    avail = np.ones(run.pool, dtype=bool) if available is None else np.asarray(available, bool)
    run.advance(avail)
    if not run.done:
        run.stop("awaiting-cells")
    return run.result
