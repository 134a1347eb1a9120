"""One model under several harnesses' configs of the same items (SPEC v5 §2b `harness`
axis): each harness's accuracy on the items every harness scored, per item which harnesses
get it right, the items on which they disagree, and §7's preserved fraction of the harness
axis. Pure: a cube in, a record out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.grid.cube import Cube


@dataclass(frozen=True)
class HarnessView:
    model: str
    harnesses: tuple[str, ...]
    configs: dict[str, tuple[str, ...]]  # harness -> its configs in view
    items: int  # items every config of every harness scored for the model
    accuracy: dict[str, dict[str, float]]  # harness -> config -> accuracy on those items
    right_under: dict[str, list[str]]  # item -> the configs that got it right (disagreements)
    agree_right: int  # items every config gets right
    agree_wrong: int  # items every config gets wrong
    disagree: int  # the rest

    def to_json(self) -> dict:
        return {"model": self.model, "harnesses": list(self.harnesses),
                "configs": {h: list(c) for h, c in self.configs.items()},
                "items": self.items, "accuracy": self.accuracy,
                "agree_right": self.agree_right, "agree_wrong": self.agree_wrong,
                "disagree": self.disagree, "disagreements": self.right_under}


def harness_view(cube: Cube, model: str) -> HarnessView:
    """The model's configs grouped by harness, on the items all of them scored."""
    if model not in cube.models:
        raise ValueError(f"unknown model {model!r}; the grid has {', '.join(cube.models)}")
    m = cube.models.index(model)
    groups: dict[str, list[int]] = {}
    for k, config in enumerate(cube.configs):
        if cube.present[m, :, k].any():
            groups.setdefault(cube.axes(config).get("harness", "unknown"), []).append(k)
    if len(groups) < 2:
        raise ValueError(f"model {model!r} has cells under one harness only "
                         f"({', '.join(groups) or 'none'}): import another harness's log")
    cols = [k for ks in groups.values() for k in ks]
    common = cube.present[m][:, cols].all(axis=1)
    bits = cube.bits[m][common][:, cols]
    items = [u for u, keep in zip(cube.items, common) if keep]
    right = bits.all(axis=1)
    wrong = ~bits.any(axis=1)
    names = [cube.configs[k] for k in cols]
    disagree = {items[i]: [names[j] for j in np.flatnonzero(bits[i])]
                for i in np.flatnonzero(~right & ~wrong)}
    accuracy = {h: {cube.configs[k]: float(bits[:, cols.index(k)].mean()) if len(items)
                    else float("nan") for k in ks} for h, ks in groups.items()}
    return HarnessView(model, tuple(groups), {h: tuple(cube.configs[k] for k in ks)
                                              for h, ks in groups.items()},
                       len(items), accuracy, disagree, int(right.sum()), int(wrong.sum()),
                       len(disagree))
