"""Synthetic grids from a documented generative model (SYNTHETIC: not real model output).

The model, per (model m, item i, config c):

    P(correct) = g + (1 - g) * sigmoid(theta_m - b_i + v_mi + h_mc)

- g = 0.05: a small floor of lucky guesses. Most chance-level accuracy comes from v_mi
  instead, because a model that does not know an item tends to be consistently wrong (an
  attractive distractor): that is what leaves robust-wrong answers.
- theta_m, model ability: evenly spread from -1.4 to 2.6 plus N(0, 0.15) jitter, so the
  reference accuracies span roughly 33-84% like the reference study's twelve models.
- b_i, item difficulty: N(mu_benchmark, 1.2) with benchmark offsets (TruthfulQA hardest,
  HellaSwag easiest); items are split across arc_challenge/hellaswag/mmlu/truthfulqa in the
  reference study's proportions (1000/1000/1000/679).
- v_mi, model-item affinity: N(0, 1.8). Shared by every config of the pair, it is what makes
  some answers robust (always right or always wrong) rather than coin flips.
- h_mc, harness effect of config c on model m, one term per axis:
    order  o1..o5: N(0, 0.35) per model and shuffle (o0 = 0);
    format paren/digit/instruct: N(-0.15, 0.45) per model and format (letter = 0);
    scoring cloze_qa/cloze_bare: N(-2.2, 0.9) per model and config — the strongest axis, as
    in the reference study where likelihood scoring moved one model from 88% to 31%.
  Order and format effects add for a config such as o3.paren.
- Each cell is then an independent Bernoulli draw: with 26 configs even a 90% cell
  probability leaves an answer robust-correct only 0.9^26 ≈ 6% of the time, which is why
  most reference-correct answers are fragile and robust accuracy is low.

With the defaults and seed 0 (12 x 3,679) the grid resembles the reference study's figures:
reference accuracy 33-84%, robust accuracy at most 23%, 88% of reference-correct answers
fragile, adjacent pairs 2 identical / 5 one item / 3 cancel / 1 ordered on the stable set,
all 11 nonzero gaps manufactured, fragile share 96% mean and 99.5% pooled.

Every number above is a parameter of `SimulationParams`; the draw is a pure function of the
seed (numpy PCG64), so a seed always gives the same grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.grid.cube import Cube
from fragility_tui.grid.configs import CONFIGS, CONFIG_IDS
from fragility_tui.grid.items import Item

BENCHMARK_SHARES = {"arc_challenge": 1000, "hellaswag": 1000, "mmlu": 1000, "truthfulqa": 679}
BENCHMARK_DIFFICULTY = {"arc_challenge": 0.0, "hellaswag": -0.4, "mmlu": 0.2, "truthfulqa": 0.8}
SYNTHETIC_PREFIX = "synthetic"


@dataclass(frozen=True)
class SimulationParams:
    guess: float = 0.05
    ability_low: float = -1.4
    ability_high: float = 2.6
    ability_jitter: float = 0.15
    difficulty_sd: float = 1.2
    affinity_sd: float = 1.8
    order_sd: float = 0.35
    format_mean: float = -0.15
    format_sd: float = 0.45
    scoring_mean: float = -2.2
    scoring_sd: float = 0.9


@dataclass(frozen=True)
class SyntheticGrid:
    cube: Cube
    items: list[Item]
    description: str


def model_names(n_models: int) -> list[str]:
    width = max(2, len(str(n_models)))
    return [f"{SYNTHETIC_PREFIX}-model-{k + 1:0{width}d}" for k in range(n_models)]


def _benchmark_sizes(n_items: int) -> dict[str, int]:
    total = sum(BENCHMARK_SHARES.values())
    sizes = {b: int(np.floor(n_items * s / total)) for b, s in BENCHMARK_SHARES.items()}
    for b in list(sizes)[: n_items - sum(sizes.values())]:
        sizes[b] += 1
    return sizes


def _harness_effects(rng: np.random.Generator, n_models: int, p: SimulationParams) -> np.ndarray:
    """h[m, c] in canonical config order."""
    order = np.concatenate([np.zeros((n_models, 1)),
                            rng.normal(0.0, p.order_sd, (n_models, 5))], axis=1)
    fmt = {"letter": np.zeros(n_models)}
    for f in ("paren", "digit", "instruct"):
        fmt[f] = rng.normal(p.format_mean, p.format_sd, n_models)
    h = np.zeros((n_models, len(CONFIGS)))
    for k, cfg in enumerate(CONFIGS):
        if cfg.scoring == "likelihood":
            h[:, k] = rng.normal(p.scoring_mean, p.scoring_sd, n_models)
        else:
            h[:, k] = order[:, cfg.shuffle_index] + fmt[cfg.format]
    return h


def simulate(n_models: int = 12, n_items: int = 3679, seed: int = 0,
             params: SimulationParams = SimulationParams()) -> SyntheticGrid:
    if n_models < 1 or n_items < 1:
        raise ValueError("simulate needs at least one model and one item")
    rng = np.random.default_rng(seed)
    p = params
    sizes = _benchmark_sizes(n_items)
    benchmarks = np.concatenate([np.full(n, b, dtype=object) for b, n in sizes.items()])
    b = rng.normal(0.0, p.difficulty_sd, n_items) + np.array(
        [BENCHMARK_DIFFICULTY[x] for x in benchmarks])
    theta = np.linspace(p.ability_low, p.ability_high, n_models)
    theta = theta + rng.normal(0.0, p.ability_jitter, n_models)
    v = rng.normal(0.0, p.affinity_sd, (n_models, n_items))
    h = _harness_effects(rng, n_models, p)
    base = (theta[:, None] - b[None, :] + v).astype(np.float32)
    logits = base[:, :, None] + h[:, None, :].astype(np.float32)
    prob = p.guess + (1 - p.guess) / (1 + np.exp(-logits))
    bits = rng.random(logits.shape, dtype=np.float32) < prob

    items = _synthetic_items(rng, benchmarks, b)
    cube = Cube(tuple(model_names(n_models)), tuple(it.item_uid for it in items),
                CONFIG_IDS, bits, np.ones_like(bits), benchmarks,
                np.array([it.subject for it in items], dtype=object))
    description = (f"SYNTHETIC grid: {n_models} simulated models x {n_items} simulated items x "
                   f"26 configs, seed {seed} (fragility_tui.grid.simulate; not real model output)")
    return SyntheticGrid(cube, items, description)


def simulate_cube(n_models: int, n_items: int, seed: int = 0) -> Cube:
    return simulate(n_models, n_items, seed).cube


def _synthetic_items(rng, benchmarks: np.ndarray, difficulty: np.ndarray) -> list[Item]:
    golds = rng.integers(0, 4, len(benchmarks))
    counters: dict[str, int] = {}
    items = []
    for bench, diff, gold in zip(benchmarks.tolist(), difficulty.tolist(), golds.tolist()):
        k = counters.get(bench, 0)
        counters[bench] = k + 1
        items.append(Item(
            item_uid=f"{bench}/sim_{k:05d}", benchmark=bench, subject=None,
            question=f"Synthetic {bench} item {k} (simulated difficulty {diff:+.2f}; no text: "
                     "this grid was generated, not evaluated)",
            choices=tuple(f"synthetic option {'ABCD'[j]}" for j in range(4)),
            gold=int(gold)))
    return items
