"""A named pair side by side under every config in view (`report --pair A,B`): each model's
accuracy and the discordant items, those only A gets right and those only B gets right.

The tour's "33 items only the base build gets right, 12 only int4" are these counts under
cloze_qa. Accuracy is over each model's present cells (SPEC §11); the discordant counts and
the paired gap are over the items where both have the cell, so only_a − only_b is the
pair's Δ in items under that config (its reference row is §6's Δ). Pure numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.grid.cube import Cube


@dataclass(frozen=True)
class ConfigPair:
    config: str
    accuracy_a: float | None  # over A's present cells; None without any
    accuracy_b: float | None
    paired_items: int  # items where both have the cell
    only_a: int  # paired items A gets right and B wrong
    only_b: int

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PairDetail:
    a: str
    b: str
    reference: str
    configs: tuple[ConfigPair, ...]  # in the order asked (the report's: canonical)

    @property
    def at_reference(self) -> ConfigPair:
        return next(c for c in self.configs if c.config == self.reference)

    def to_json(self) -> dict:
        ref = self.at_reference
        return {"a": self.a, "b": self.b, "reference": self.reference,
                "accuracy_a": ref.accuracy_a, "accuracy_b": ref.accuracy_b,
                "paired_items": ref.paired_items, "only_a": ref.only_a, "only_b": ref.only_b,
                "configs": [c.to_json() for c in self.configs]}


def _accuracy(bits: np.ndarray, present: np.ndarray) -> np.ndarray:
    n = present.sum(axis=0)
    right = (bits & present).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, right / np.maximum(n, 1), np.nan)


def pair_detail(cube: Cube, a: str, b: str, configs=None) -> PairDetail:
    """Models a and b of the cube under each of `configs` (default: the cube's)."""
    configs = tuple(configs or cube.configs)
    cols = [cube.configs.index(c) for c in configs]
    i, j = cube.models.index(a), cube.models.index(b)
    bits_a, bits_b = cube.bits[i][:, cols], cube.bits[j][:, cols]
    pres_a, pres_b = cube.present[i][:, cols], cube.present[j][:, cols]
    paired = pres_a & pres_b
    acc_a, acc_b = _accuracy(bits_a, pres_a), _accuracy(bits_b, pres_b)
    only_a = (bits_a & ~bits_b & paired).sum(axis=0)
    only_b = (bits_b & ~bits_a & paired).sum(axis=0)
    n = paired.sum(axis=0)
    rows = tuple(ConfigPair(c, None if np.isnan(acc_a[k]) else float(acc_a[k]),
                            None if np.isnan(acc_b[k]) else float(acc_b[k]), int(n[k]),
                            int(only_a[k]), int(only_b[k])) for k, c in enumerate(configs))
    return PairDetail(a, b, cube.reference, rows)
