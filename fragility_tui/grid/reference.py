"""The reference config of a cube: which one a grid is measured against, and the one check
that it is in view. numpy-free, so the app's selection (tui/selection.py) can call it before
the analysis stack loads.

Every statistic is measured against the reference (SPEC §2: o0.letter; a grid without
o0.letter cells stands in its first config in canonical order, `configs.default_reference`).
The CLI (`report`, `calibrate`, `export`), the services and the app all choose it here and
check it here, so they agree on the choice and say the same thing when it is missing.
"""

from __future__ import annotations

from fragility_tui.errors import InputError
from fragility_tui.harness.configs import default_reference


class ReferenceNotInView(InputError, ValueError):
    """The reference config is not among the configs in view. An InputError, so the CLI
    exits 2 with the message; a ValueError, as the analysis functions raise for a cube they
    cannot measure."""


def check_reference(reference: str, configs, *, field: str | None = None,
                    hint: str = "") -> None:
    """Raise ReferenceNotInView unless `reference` is among `configs` (the configs in view:
    a cube's, a selection's or a form's). field: the flag or field to name; hint: what the
    user can do about it, appended in parentheses."""
    if reference not in configs:
        raise ReferenceNotInView(
            f"the reference config {reference} must be in view: every statistic is "
            "measured against it" + (f" ({hint})" if hint else ""), field=field)


def choose_reference(cube, reference: str | None = None):
    """The grid's cube (grid/cube.py's Cube, which imports this module) measured against `reference` (--reference), or against the default
    reference of its configs (`configs.default_reference`). An unknown id, or one the grid
    has no cells for, is an InputError naming --reference; a grid with no cells at all one
    naming --grid."""
    if reference is None:
        reference = default_reference(cube.configs)
        if reference is None:
            raise InputError("the grid has no cells", field="--grid")
        return cube.with_reference(reference)
    if reference not in cube.configs:
        from fragility_tui.harness.config_axes import derived_axes

        if not derived_axes(reference):  # neither ours nor an imported id
            raise InputError(f"unknown config {reference!r}; the grid has "
                             f"{', '.join(cube.configs)}", field="--reference")
        raise InputError(f"the grid has no cells for {reference}; it has "
                         f"{', '.join(cube.configs)}", field="--reference")
    return cube.with_reference(reference)
