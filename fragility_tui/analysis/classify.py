"""SPEC §4 classification of every (model, item) and the §5 per-model band.

All functions take a `Cube` and return arrays in the cube's own model/item/config order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.grid.cube import Cube

ROBUST_CORRECT, ROBUST_WRONG, FRAGILE, INCOMPLETE = 0, 1, 2, 3
CLASS_NAMES = ("robust-correct", "robust-wrong", "fragile", "incomplete")


@dataclass(frozen=True, eq=False)
class Classification:
    """Per-(model, item) class over the configs in view (SPEC §4); arrays are [M, I]."""

    codes: np.ndarray  # int8: ROBUST_CORRECT / ROBUST_WRONG / FRAGILE / INCOMPLETE
    complete: np.ndarray  # bool: every cell in view present

    @property
    def robust_correct(self) -> np.ndarray:
        return self.codes == ROBUST_CORRECT

    @property
    def robust_wrong(self) -> np.ndarray:
        return self.codes == ROBUST_WRONG

    @property
    def fragile(self) -> np.ndarray:
        return self.codes == FRAGILE

    @property
    def robust(self) -> np.ndarray:
        return self.codes <= ROBUST_WRONG

    def reordered(self, models: np.ndarray, items: np.ndarray) -> "Classification":
        """The same classes with models and items taken in the given index order."""
        return Classification(self.codes[np.ix_(models, items)],
                              self.complete[np.ix_(models, items)])

    def counts(self) -> np.ndarray:
        """[M, 4] counts per class, columns in CLASS_NAMES order."""
        m = self.codes.shape[0]
        offsets = np.arange(m)[:, None] * 4
        return np.bincount((self.codes + offsets).ravel(), minlength=4 * m).reshape(m, 4)


def classify(cube: Cube) -> Classification:
    complete = cube.present.all(axis=2)
    all_correct = cube.bits.all(axis=2)  # bits are False on missing cells
    any_correct = cube.bits.any(axis=2)
    codes = np.full(complete.shape, FRAGILE, dtype=np.int8)
    codes[all_correct] = ROBUST_CORRECT
    codes[~any_correct] = ROBUST_WRONG
    codes[~complete] = INCOMPLETE
    return Classification(codes, complete)


@dataclass(frozen=True, eq=False)
class ConfigAccuracy:
    """Per (model, config): correct cells, present cells, accuracy (NaN with no cells)."""

    correct: np.ndarray  # int64 [M, C]
    present: np.ndarray  # int64 [M, C]
    accuracy: np.ndarray  # float64 [M, C]

    def reordered(self, models: np.ndarray) -> "ConfigAccuracy":
        """The same figures with models taken in the given index order."""
        return ConfigAccuracy(self.correct[models], self.present[models], self.accuracy[models])


def config_accuracy(cube: Cube) -> ConfigAccuracy:
    """SPEC §11: accuracy = correct / the model's present cells in that config."""
    correct = np.count_nonzero(cube.bits, axis=1).astype(np.int64)
    present = np.count_nonzero(cube.present, axis=1).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(present > 0, correct / np.maximum(present, 1), np.nan)
    return ConfigAccuracy(correct, present, accuracy)


@dataclass(frozen=True)
class Band:
    """SPEC §5 for one model. Accuracies are fractions; None when undefined."""

    model: str
    reference: float | None
    min: float | None
    min_config: str | None
    max: float | None
    max_config: str | None
    spread: float | None
    mean: float | None
    robust_accuracy: float | None
    fragile_share_of_reference_correct: float | None
    robust_correct: int
    robust_wrong: int
    fragile: int
    incomplete: int
    reference_correct: int  # over complete rows (the denominator of the fragile share)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _opt(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def bands(cube: Cube, cls: Classification | None = None,
          acc: ConfigAccuracy | None = None) -> list[Band]:
    cls = cls if cls is not None else classify(cube)
    acc = acc if acc is not None else config_accuracy(cube)
    ref = cube.reference_index
    counts = cls.counts()
    ref_correct = cube.bits[:, :, ref] & cls.complete
    n_ref_correct = np.count_nonzero(ref_correct, axis=1)
    n_ref_correct_fragile = np.count_nonzero(ref_correct & cls.fragile, axis=1)
    n_complete = np.count_nonzero(cls.complete, axis=1)
    out = []
    for m, model in enumerate(cube.models):
        row = acc.accuracy[m]
        defined = np.isfinite(row)
        lo = hi = None
        if defined.any():
            # argmin/argmax return the first hit: canonical config order breaks ties (§11)
            lo = int(np.argmin(np.where(defined, row, np.inf)))
            hi = int(np.argmax(np.where(defined, row, -np.inf)))
        out.append(Band(
            model=model,
            reference=_opt(row[ref]),
            min=None if lo is None else float(row[lo]),
            min_config=None if lo is None else cube.configs[lo],
            max=None if hi is None else float(row[hi]),
            max_config=None if hi is None else cube.configs[hi],
            spread=None if lo is None else float(row[hi] - row[lo]),
            mean=float(row[defined].mean()) if defined.any() else None,
            robust_accuracy=(float(counts[m, ROBUST_CORRECT] / n_complete[m])
                             if n_complete[m] else None),
            fragile_share_of_reference_correct=(float(n_ref_correct_fragile[m] / n_ref_correct[m])
                                                if n_ref_correct[m] else None),
            robust_correct=int(counts[m, ROBUST_CORRECT]),
            robust_wrong=int(counts[m, ROBUST_WRONG]),
            fragile=int(counts[m, FRAGILE]),
            incomplete=int(counts[m, INCOMPLETE]),
            reference_correct=int(n_ref_correct[m]),
        ))
    return out
