"""What every pane honours: the configs, models and benchmarks in view. numpy-free, so
the app's first frame does not wait for the analysis stack (tui/view_model.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataclasses import dataclass, replace

if TYPE_CHECKING:
    from fragility_tui.grid.cube import Cube


@dataclass(frozen=True)
class Selection:
    """What every pane honours: None means everything; reference None means the grid's
    default reference (o0.letter, `grid.reference.choose_reference`), a config id measures
    every statistic against that config instead (`report --reference`)."""

    configs: tuple[str, ...] | None = None
    models: tuple[str, ...] | None = None
    benchmarks: tuple[str, ...] | None = None
    reference: str | None = None

    def measured(self, cube: Cube) -> Cube:
        """The whole grid measured against this selection's reference (the one choice and
        check of `grid.reference`: an unknown id or one without cells is an InputError)."""
        from fragility_tui.grid.reference import choose_reference  # after the first frame

        return choose_reference(cube, self.reference)

    def apply(self, cube: Cube) -> Cube:
        from fragility_tui.grid.reference import check_reference

        if self.configs is not None:
            check_reference(cube.reference, self.configs)
        return cube.select(configs=self.configs, models=self.models, benchmarks=self.benchmarks)

    def describe(self, cube: Cube) -> str:
        """The status line's account of the view; it names the reference when it is not
        SPEC's o0.letter (a grid without o0.letter cells, see `grid.reference.choose_reference`)."""
        from fragility_tui.harness.configs import REFERENCE

        note = "" if cube.reference == REFERENCE else f" · reference {cube.reference}"
        if replace(self, reference=None) == Selection():
            return "selection: everything" + note
        parts = []
        for name, chosen, total in (("configs", self.configs, len(cube.configs)),
                                    ("models", self.models, len(cube.models)),
                                    ("benchmarks", self.benchmarks,
                                     len(set(cube.benchmarks.tolist())))):
            if chosen is not None:
                parts.append(f"{len(chosen)}/{total} {name}")
        return "selection: " + ", ".join(parts) + note
