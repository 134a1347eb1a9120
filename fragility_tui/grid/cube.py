"""The dense cube every statistic reads: bits[model, item, config] plus a presence mask."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fragility_tui.errors import InputError
from fragility_tui.grid.reference import check_reference
from fragility_tui.harness.config_axes import canonical_order, config_sort_key, merge_axes
from fragility_tui.harness.configs import REFERENCE


@dataclass(frozen=True, eq=False)
class Cube:
    """One grid (or a selection of it) as arrays.

    bits[m, i, c] is True when model m answered item i correctly under config c; it is
    False wherever present[m, i, c] is False (a missing cell). Configs are always kept in
    canonical SPEC order; models and items in the order given. `reference` is the config
    every statistic is measured against (SPEC's o0.letter unless chosen otherwise, see
    `grid.reference`); it must be in view when a statistic needs it.
    """

    models: tuple[str, ...]
    items: tuple[str, ...]  # item_uid
    configs: tuple[str, ...]  # config ids, canonical order
    bits: np.ndarray  # bool [M, I, C]
    present: np.ndarray  # bool [M, I, C]
    benchmarks: np.ndarray  # object/str [I]
    subjects: np.ndarray | None = None  # object [I] (None entries allowed)
    reference: str = REFERENCE  # config id
    # bool [M, I, C]: cells recorded near_tie (decided inside the run's rounding; runner docs,
    # margins and near-ties); None when the grid records none
    near_tie: np.ndarray | None = None
    # {config_id: axes} stored with the grid (SPEC §2b) for configs whose id does not say
    # all of them (imported, long-format); the rest are read off the id
    stated_axes: dict | None = None

    def __post_init__(self):
        shape = (len(self.models), len(self.items), len(self.configs))
        if self.bits.shape != shape or self.present.shape != shape:
            raise ValueError(f"cube arrays have shape {self.bits.shape}/{self.present.shape}, "
                             f"expected {shape}")
        if self.near_tie is not None and self.near_tie.shape != shape:
            raise ValueError(f"near-tie mask has shape {self.near_tie.shape}, expected {shape}")
        if list(self.configs) != sorted(self.configs, key=config_sort_key):
            raise ValueError("cube configs must be in canonical order")
        if not isinstance(self.reference, str) or not self.reference:
            raise ValueError(f"unknown reference config {self.reference!r}")

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.bits.shape

    @property
    def reference_index(self) -> int:
        check_reference(self.reference, self.configs)
        return self.configs.index(self.reference)

    def with_reference(self, config: str) -> "Cube":
        """The same cube measured against another reference config (a known id)."""
        return replace(self, reference=config)

    def axes(self, config_id: str) -> dict[str, str]:
        """The config's axes (SPEC §2b): what was stored with the grid, else its id's."""
        return merge_axes(config_id, (self.stated_axes or {}).get(config_id))

    @property
    def complete(self) -> bool:
        return bool(self.present.all())

    def select(self, configs=None, models=None, benchmarks=None) -> "Cube":
        """A sub-cube; unknown names raise ValueError naming them. Order stays canonical
        for configs and as-given for models (the caller's order) and items (grid order)."""
        c_idx = self._indices("config", self.configs, configs, keep_order=False)
        m_idx = self._indices("model", self.models, models, keep_order=True)
        if benchmarks is None:
            i_idx = np.arange(len(self.items))
        else:
            wanted = set(benchmarks)
            unknown = wanted - set(self.benchmarks.tolist())
            if unknown:
                raise ValueError(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
            i_idx = np.flatnonzero(np.isin(self.benchmarks, list(wanted)))
        grid = np.ix_(m_idx, i_idx, c_idx)
        return Cube(
            models=tuple(self.models[k] for k in m_idx),
            items=tuple(self.items[k] for k in i_idx),
            configs=tuple(self.configs[k] for k in c_idx),
            bits=self.bits[grid],
            present=self.present[grid],
            benchmarks=self.benchmarks[i_idx],
            subjects=None if self.subjects is None else self.subjects[i_idx],
            reference=self.reference,
            near_tie=None if self.near_tie is None else self.near_tie[grid],
            stated_axes=self.stated_axes,
        )

    def pair_configs(self, a: str, b: str) -> "Cube":
        """The cube in the configs models a and b have: a config where either has no cell at
        all (another model's import, a config only one of them was run under) is out of
        view, so it does not hold the pair back (issue 58); a config the pair has on some
        items only still stops a replay where its cells end ('awaiting-cells'). `compare A B
        --grid` and the app's replay both read a pair through it."""
        ia, ib = self.models.index(a), self.models.index(b)
        has = self.present[ia].any(axis=0) & self.present[ib].any(axis=0)
        keep = [c for k, c in enumerate(self.configs) if has[k]]
        if not keep:
            raise InputError(f"{a} and {b} have no config in common in this grid", field="A B")
        return self if len(keep) == len(self.configs) else self.select(configs=keep)

    @staticmethod
    def _indices(kind, names, wanted, keep_order):
        if wanted is None:
            return np.arange(len(names))
        pos = {n: k for k, n in enumerate(names)}
        unknown = [w for w in wanted if w not in pos]
        if unknown:
            raise ValueError(f"unknown {kind}(s): {', '.join(unknown)}")
        idx = [pos[w] for w in dict.fromkeys(wanted)]
        return np.array(idx if keep_order else sorted(idx), dtype=np.intp)


def cube_from_long(models, items, configs, correct, benchmarks_by_item: dict[str, str],
                   subjects_by_item: dict[str, str | None] | None = None,
                   model_order=None, item_order=None, stated_axes=None) -> Cube:
    """Build a cube from long-format columns (equal-length sequences of cells)."""
    models = np.asarray(models, dtype=object)
    items = np.asarray(items, dtype=object)
    configs = np.asarray(configs, dtype=object)
    model_names = list(model_order) if model_order is not None else sorted(set(models.tolist()))
    item_names = list(item_order) if item_order is not None else list(dict.fromkeys(items.tolist()))
    config_names = canonical_order(configs.tolist())
    m = _codes(models, model_names)
    i = _codes(items, item_names)
    c = _codes(configs, config_names)
    shape = (len(model_names), len(item_names), len(config_names))
    bits = np.zeros(shape, dtype=bool)
    present = np.zeros(shape, dtype=bool)
    bits[m, i, c] = np.asarray(correct, dtype=bool)
    present[m, i, c] = True
    bench = np.array([benchmarks_by_item.get(u) or "unknown" for u in item_names], dtype=object)
    subj = None
    if subjects_by_item is not None:
        subj = np.array([subjects_by_item.get(u) for u in item_names], dtype=object)
    return Cube(tuple(model_names), tuple(item_names), tuple(config_names), bits, present,
                bench, subj, stated_axes=stated_axes)


def _codes(values: np.ndarray, names: list[str]) -> np.ndarray:
    lookup = {n: k for k, n in enumerate(names)}
    return np.fromiter((lookup[v] for v in values.tolist()), dtype=np.intp, count=len(values))
