"""Synthetic grids from a documented generative model (SYNTHETIC: not real model output).

Generator v8, written out with its fitted parameters and figures in docs/spec.md ("The
synthetic generator"). Every model answers every (item, config) with the argmax over the
four options' scores, so an answer is an option, order effects come from the real option
permutation of each order config, and the cells of a (model, item) are correlated:

    score[m,i,c,j] = [j = gold] * a_i * (theta_mc - b_i)            2PL gold advantage
                   + D_ij + [j = gold] * a_i^p * k_mi                distractors, knowledge
                   + a_i * g * u_mij                                 conviction
                   + a_i * s_i * (sqrt(1 - w^2) * e_mic + w * e_ic)  harness noise
                   + a_i * bias_mc[position of option j in config c] position/label bias

(p = `knowledge_power`, w = `shared_noise`; e = e_order + e_format + e_config, drawn per
model (e_mic) and once for all models (e_ic); k_mi = `knowledge_sd` * |v * z_i +
sqrt(1 - v^2) * z_mi| with v = `knowledge_shared`, z_i once per item for all models;
g = `conviction_sd`, u_mij ~ N(0, 1) per model, item and option, the same in every config.)

- Items: difficulty b_i, discrimination a_i (log-normal), harness sensitivity s_i (log-normal,
  correlated with a_i by `sensitivity_corr`), distractor attractiveness D_ij (gold 0).
  TruthfulQA keeps its gold first in native order (SPEC §1 mc1 assembly).
- Models: generation ability theta_m (from `ability_low` to `ability_high`, spaced as
  t^`ability_power` for t evenly in [0, 1], plus jitter) with per-format shifts: the three
  formats other than letter move it by -c, 0 and +c (c = `format_shift`) in a random order
  per model (v7; v6 drew three independent normals, and the twelve models' largest draws
  decided the discrimination-fragility r and the discriminative champions of a grid);
  likelihood ability lambda_m correlated with theta (`likelihood_rho`) but not equal;
  knowledge k_mi >= 0 lifting the gold in every config (what keeps answers robust), scaled
  by a_i^p: in v3 (p = 0) a low-a item, almost noise-free, was decided by one model's
  knowledge against the distractors, robust-correct for one model and robust-wrong for the
  next, so no adjacent pair was ever identical on the stable set (docs/spec.md). In v5 it
  is partly common to all models (`knowledge_shared`): what one model knows, the next one
  mostly knows too (models learn from overlapping data), so adjacent models agree on
  which items they answer robustly. In v6 the abilities are spaced unevenly (power > 1:
  closer together at the bottom, the strong models further apart), so the strong half is
  not a block of similar models that ties at the top of the most discriminative items.
  In v8 each model also has its own conviction about each item's options (u_mij), held in
  every config: knowledge only ever lifts the gold, so before v8 nothing made a model
  robustly wrong (or right) on an item for reasons of its own, and the
  discrimination-fragility r ran high.
- Harness noise: per option, shared by the configs of one order (e_order), of one format
  (e_format), and per config; every config gets all three, the reference (o0.letter)
  included: it is one harness among 26, not a noise-free baseline. A weight w of it is
  common to all models (drawn once per grid, stream [seed, 2]): a harness moves an item
  for every model alike, so the reference still orders models on a fragile item. It flips
  an answer only where the gold's margin over the best distractor is small: items near a
  model's ability and with close distractors are the sensitive ones.
- Biases: per model a position bias, per (model, format) a label bias, per (model, config)
  jitter, added to whichever option the config shows at that position.
- Cloze configs: lambda_m plus a per-config shift, an option prior shared by every model,
  noise; order-invariant, no position or label bias.

The defaults were fitted in expectation (benchmarks/fit_synthetic.py, its output in
benchmarks/fit_synthetic.json): each reference figure's mean over 24 seeds of 12 x 3,679
grids against the paper's, weighted by the figure's spread over seeds. docs/spec.md states
each figure's tolerance (from that spread, set before the fit), its mean and 5-95% range over
seeds, and what the generator does not reach; tests/grid/test_synthetic_figures.py checks
seeds 1-8 against those tolerances.

The true parameters travel with the grid (`SyntheticGrid.truth`, `.meta()` for the store);
the app's item drill-down shows them. The draw is a pure function of the seed (numpy
PCG64): item and model parameters from stream [seed, 0], model m's cells from [seed, 1, m],
the shared harness noise from [seed, 2], the common knowledge z_i from [seed, 3], model m's
conviction from [seed, 4, m] (so at `conviction_sd` 0 a v8 grid is the v7 grid), one model
at a time so memory stays O(items x configs) per model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fragility_tui.harness.configs import (CONFIGS, CONFIG_IDS, GENERATION_FORMATS,
                                        item_shuffles)
from fragility_tui.grid.cube import Cube
from fragility_tui.items.item import Item

BENCHMARK_SHARES = {"arc_challenge": 1000, "hellaswag": 1000, "mmlu": 1000, "truthfulqa": 679}
BENCHMARK_DIFFICULTY = {"arc_challenge": 0.0, "hellaswag": -0.4, "mmlu": 0.2, "truthfulqa": 0.8}
GOLD_FIRST = {"truthfulqa"}  # mc1 keeps its gold first in native order (SPEC §1)
SYNTHETIC_PREFIX = "synthetic"
GENERATOR_VERSION = 8  # 3: harness noise in the reference config, fitted over seeds;
# 4: knowledge scaled by a_i^knowledge_power, part of the harness noise common to all models;
# 5: part of the knowledge common to all models (knowledge_shared), refitted;
# 6: abilities spaced by a power (ability_power), refitted; 7: each model's format shifts
# are -c, 0, +c in a random order (format_shift), refitted; 8: a model's conviction about
# an item's options, the same in every config (conviction_sd), refitted
# The option shuffles are those of the grid seed a stored synthetic grid has (0): the app
# re-renders a cell with configs.item_shuffles(grid seed, item_uid), so no cell needs to
# carry its permutation (that column would triple the shipped file).
SHUFFLE_SEED = 0
N_OPT = 4


@dataclass(frozen=True)
class SimulationParams:
    """The generator's parameters (docs/spec.md); defaults fitted by benchmarks/fit_synthetic.py."""

    ability_low: float = -0.6
    ability_high: float = 3.5
    ability_jitter: float = 0.15
    ability_power: float = 1.3
    difficulty_sd: float = 1.2067
    discrimination_sd: float = 1.2633
    sensitivity_sd: float = 0.225
    sensitivity_corr: float = 0.95
    distractor_sd: float = 0.9019
    knowledge_sd: float = 1.2
    knowledge_power: float = 0.5
    knowledge_shared: float = 0.7
    order_sd: float = 0.4485
    format_sd: float = 0.5385
    config_sd: float = 0.4441
    shared_noise: float = 0.98
    format_shift: float = 2.186
    position_bias_sd: float = 0.0504
    label_bias_sd: float = 0.3891
    config_bias_sd: float = 0.2975
    likelihood_rho: float = 0.1
    likelihood_mean: float = -0.5
    likelihood_sd: float = 0.2782
    cloze_shift_sd: float = 0.0062
    prior_sd: float = 1.7085
    cloze_sd: float = 0.7901
    conviction_sd: float = 0.3


@dataclass(frozen=True)
class SyntheticTruth:
    """The parameters a synthetic grid was drawn from (arrays in the cube's model/item order)."""

    ability: np.ndarray  # theta_m, generation
    likelihood_ability: np.ndarray  # lambda_m
    difficulty: np.ndarray  # b_i
    discrimination: np.ndarray  # a_i
    sensitivity: np.ndarray  # s_i
    distractors: np.ndarray  # D_ij [I, 4], native order, 0 at the gold

    @property
    def true_rank(self) -> np.ndarray:
        """1 = highest generation ability (the order the reference config estimates)."""
        order = np.argsort(-self.ability, kind="stable")
        rank = np.empty(len(order), dtype=int)
        rank[order] = np.arange(1, len(order) + 1)
        return rank

    def closest_distractor(self, gold: np.ndarray) -> np.ndarray:
        """Per item: the most attractive distractor's D (the gold's is 0; near or above 0
        is a close distractor)."""
        d = self.distractors.copy()
        d[np.arange(len(gold)), gold] = -np.inf
        return d.max(axis=1)

    def to_meta(self, models, items: list[Item], params: "SimulationParams") -> dict:
        """JSON for the grid's metadata (4 decimals): what the drill-down shows."""
        r = lambda x: [round(float(v), 4) for v in x]  # noqa: E731
        gold = np.array([it.gold for it in items])
        return {"generator_version": GENERATOR_VERSION, "params": asdict(params),
                "models": {name: {"ability": round(float(t), 4),
                                  "likelihood_ability": round(float(lam), 4),
                                  "true_rank": int(k)}
                           for name, t, lam, k in zip(models, self.ability,
                                                      self.likelihood_ability, self.true_rank)},
                "item_uids": [it.item_uid for it in items],
                "difficulty": r(self.difficulty), "discrimination": r(self.discrimination),
                "sensitivity": r(self.sensitivity),
                "closest_distractor": r(self.closest_distractor(gold))}


@dataclass(frozen=True)
class SyntheticGrid:
    cube: Cube
    items: list[Item]
    description: str
    truth: SyntheticTruth | None = None
    pred: np.ndarray | None = None  # int8 [M, I, C]: the native option each cell chose
    permutations: np.ndarray | None = None  # int8 [I, 24, 4]: display order per gen config
    # (configs.item_shuffles(SHUFFLE_SEED, uid), what `render` shows: not written to cells)
    params: SimulationParams | None = None
    seed: int = 0

    def meta(self) -> dict:
        """What the store keeps with the grid: the generator and its true parameters."""
        meta = {"generator": "fragility_tui.grid.simulate",
                "simulate": {"n_models": len(self.cube.models), "n_items": len(self.cube.items),
                             "seed": self.seed}}
        if self.truth is not None:
            meta["truth"] = self.truth.to_meta(self.cube.models, self.items, self.params)
        return meta


def model_names(n_models: int) -> list[str]:
    width = max(2, len(str(n_models)))
    return [f"{SYNTHETIC_PREFIX}-model-{k + 1:0{width}d}" for k in range(n_models)]


def _benchmark_sizes(n_items: int) -> dict[str, int]:
    total = sum(BENCHMARK_SHARES.values())
    sizes = {b: int(np.floor(n_items * s / total)) for b, s in BENCHMARK_SHARES.items()}
    for b in list(sizes)[: n_items - sum(sizes.values())]:
        sizes[b] += 1
    return sizes


GEN = [k for k, c in enumerate(CONFIGS) if c.scoring == "generate"]
CLOZE = [k for k, c in enumerate(CONFIGS) if c.scoring == "likelihood"]
GEN_ORDER = np.array([CONFIGS[k].shuffle_index for k in GEN])
GEN_FORMAT = np.array([GENERATION_FORMATS.index(CONFIGS[k].format) for k in GEN])


def _draw_truth(rng, n_models: int, benchmarks: np.ndarray, gold: np.ndarray,
                p: SimulationParams) -> SyntheticTruth:
    n_items = len(benchmarks)
    theta = p.ability_low + (p.ability_high - p.ability_low) * np.linspace(
        0.0, 1.0, n_models) ** p.ability_power
    theta = theta + rng.normal(0.0, p.ability_jitter, n_models)
    z = (theta - theta.mean()) / (theta.std() or 1.0)
    rho = p.likelihood_rho
    lam = p.likelihood_mean + p.likelihood_sd * (
        rho * z + np.sqrt(1 - rho * rho) * rng.normal(0.0, 1.0, n_models))
    b = rng.normal(0.0, p.difficulty_sd, n_items) + np.array(
        [BENCHMARK_DIFFICULTY[x] for x in benchmarks])
    za = rng.normal(0.0, 1.0, n_items)
    a = np.exp(p.discrimination_sd * za)
    k = p.sensitivity_corr
    s = np.exp(p.sensitivity_sd * (k * za + np.sqrt(1 - k * k) * rng.normal(0.0, 1.0, n_items)))
    d = rng.normal(0.0, p.distractor_sd, (n_items, N_OPT))
    d[np.arange(n_items), gold] = 0.0
    return SyntheticTruth(theta, lam, b, a, s, d)


def _display_positions(seed: int, item_uids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """perms[i, g, p] = native option shown at position p in generation config g (the same
    shuffle `render` uses, configs.item_shuffles), and pos[i, g, j] = position of option j."""
    shuffles = np.array([item_shuffles(seed, uid) for uid in item_uids], dtype=np.int8)
    perms = shuffles[:, GEN_ORDER, :]  # [I, 24, 4]
    pos = np.argsort(perms, axis=2).astype(np.int8)
    return perms, pos


def _harness_noise(rng, n_items: int, p: SimulationParams) -> np.ndarray:
    """[I, 24, 4] per-option noise of the generation configs: e_order + e_format + e_config."""
    normal = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    by_order = normal(n_items, 6, N_OPT)
    by_format = normal(n_items, len(GENERATION_FORMATS), N_OPT)
    return (p.order_sd * by_order[:, GEN_ORDER] + p.format_sd * by_format[:, GEN_FORMAT]
            + p.config_sd * normal(n_items, len(GEN), N_OPT))


def _model_scores(rng, m: int, truth: SyntheticTruth, gold_hot: np.ndarray, prior: np.ndarray,
                  pos: np.ndarray, p: SimulationParams, shared: np.ndarray,
                  common_knowledge: np.ndarray, conviction: np.ndarray) -> np.ndarray:
    """Scores [I, 26, 4] (float32) of model m: generation configs, then the cloze pair."""
    n_items = len(truth.difficulty)
    f32 = np.float32
    a = truth.discrimination.astype(f32)[:, None, None]
    scale = (truth.discrimination * truth.sensitivity).astype(f32)[:, None, None]
    normal = lambda *shape: rng.standard_normal(shape, dtype=f32)  # noqa: E731
    # each model follows one format better than letter and one worse, by the same size
    fmt_shift = np.concatenate([[0.0], p.format_shift * rng.permutation(
        np.array([-1.0, 0.0, 1.0]))]).astype(f32)
    bias = (rng.normal(0.0, p.position_bias_sd, (1, N_OPT))
            + rng.normal(0.0, p.label_bias_sd, (len(GENERATION_FORMATS), N_OPT))[GEN_FORMAT]
            + rng.normal(0.0, p.config_bias_sd, (len(GEN), N_OPT))).astype(f32)  # [24, pos]
    cloze_shift = rng.normal(0.0, p.cloze_shift_sd, len(CLOZE)).astype(f32)
    # knowledge of the item, partly common to all models: a half-normal lift of the gold in
    # every config
    v = np.float32(p.knowledge_shared)
    own = normal(n_items)
    knows = p.knowledge_sd * np.abs(v * common_knowledge + np.sqrt(1 - v * v) * own) * (
        truth.discrimination.astype(f32) ** f32(p.knowledge_power))
    base = (truth.distractors.astype(f32) + gold_hot[:, 0, :] * knows[:, None]
            + truth.discrimination.astype(f32)[:, None] * f32(p.conviction_sd) * conviction
            )[:, None, :]

    ability = (truth.ability[m] + fmt_shift[GEN_FORMAT]).astype(f32)  # [24]
    gap = a * (ability[None, :, None] - truth.difficulty.astype(f32)[:, None, None])
    # Every config, the reference included, is one draw of the harness: the native order and
    # the letter format get their own noise like the others (v2 left o0.letter noise-free, a
    # neutral harness that was the best config of most models, which the paper denies).
    w = np.float32(p.shared_noise)
    noise = np.sqrt(1 - w * w) * _harness_noise(rng, n_items, p) + w * shared
    gen = (base + gold_hot * gap + scale * noise
           + a * np.take_along_axis(bias[None, :, :], pos.astype(np.intp), axis=2))

    lam = (truth.likelihood_ability[m] + cloze_shift).astype(f32)  # [2]
    gap = a * (lam[None, :, None] - truth.difficulty.astype(f32)[:, None, None])
    cloze = base + gold_hot * gap + scale * (prior[:, None, :] + p.cloze_sd * normal(
        n_items, len(CLOZE), N_OPT))
    return np.concatenate([gen, cloze], axis=1)


def simulate(n_models: int = 12, n_items: int = 3679, seed: int = 0,
             params: SimulationParams = SimulationParams()) -> SyntheticGrid:
    if n_models < 1 or n_items < 1:
        raise ValueError("simulate needs at least one model and one item")
    p = params
    rng = np.random.default_rng([seed, 0])
    sizes = _benchmark_sizes(n_items)
    benchmarks = np.concatenate([np.full(n, b, dtype=object) for b, n in sizes.items()])
    gold = rng.integers(0, N_OPT, n_items)
    gold[np.isin(benchmarks, list(GOLD_FIRST))] = 0
    truth = _draw_truth(rng, n_models, benchmarks, gold, p)
    prior = rng.normal(0.0, p.prior_sd, (n_items, N_OPT)).astype(np.float32)
    items = _synthetic_items(benchmarks, truth, gold)
    uids = [it.item_uid for it in items]
    perms, pos = _display_positions(SHUFFLE_SEED, uids)

    gold_hot = (np.arange(N_OPT)[None, :] == gold[:, None])[:, None, :]
    pred = np.empty((n_models, n_items, len(CONFIGS)), dtype=np.int8)
    shared = _harness_noise(np.random.default_rng([seed, 2]), n_items, p)
    common_knowledge = np.random.default_rng([seed, 3]).standard_normal(n_items,
                                                                        dtype=np.float32)
    for m in range(n_models):  # one model at a time: scores are [I, 26, 4] float32
        conviction = np.random.default_rng([seed, 4, m]).standard_normal((n_items, N_OPT),
                                                                         dtype=np.float32)
        scores = _model_scores(np.random.default_rng([seed, 1, m]), m, truth, gold_hot,
                               prior, pos, p, shared, common_knowledge, conviction)
        pred[m] = scores.argmax(axis=2)
    bits = pred == gold[None, :, None]
    cube = Cube(tuple(model_names(n_models)), tuple(uids), CONFIG_IDS, bits,
                np.ones_like(bits), benchmarks, np.array([None] * n_items, dtype=object))
    description = (f"SYNTHETIC grid: {n_models} simulated models x {n_items} simulated items x "
                   f"26 configs, seed {seed} (fragility_tui.grid.simulate v{GENERATOR_VERSION}; "
                   "not real model output)")
    return SyntheticGrid(cube, items, description, truth, pred, perms, p, seed)


def simulate_cube(n_models: int, n_items: int, seed: int = 0) -> Cube:
    return simulate(n_models, n_items, seed).cube


def _synthetic_items(benchmarks: np.ndarray, truth: SyntheticTruth, gold: np.ndarray) -> list[Item]:
    counters: dict[str, int] = {}
    items = []
    for bench, b, a, g in zip(benchmarks.tolist(), truth.difficulty.tolist(),
                              truth.discrimination.tolist(), gold.tolist()):
        k = counters.get(bench, 0)
        counters[bench] = k + 1
        items.append(Item(
            item_uid=f"{bench}/sim_{k:05d}", benchmark=bench, subject=None,
            question=f"Synthetic {bench} item {k} (true 2PL difficulty {b:+.2f}, "
                     f"discrimination {a:.2f}; no text: this grid was generated, not evaluated)",
            choices=tuple(f"synthetic option {'ABCD'[j]}" for j in range(N_OPT)),
            gold=int(g)))
    return items
