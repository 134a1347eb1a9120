"""The eight panes, in digit-key order.

The names are read here; a pane's class is imported on first use (`pane_class`, `PANES`,
`from fragility_tui.tui.panes import BandsPane`), so the app's first frame imports the
Grids pane alone and the seven hidden panes load after it (tui/app.py, tui/startup.py)."""

from __future__ import annotations

import importlib

from fragility_tui.tui.panes.base import Pane

# (pane id = module name, title, class name), in digit-key order; each class declares the
# same id and title (tests/tui/test_app_pilot.py::test_pane_names_match_their_classes)
PANE_NAMES: tuple[tuple[str, str, str], ...] = (
    ("grids", "Grids", "GridsPane"),
    ("bands", "Bands", "BandsPane"),
    ("pairs", "Pairs", "PairsPane"),
    ("items", "Items", "ItemsPane"),
    ("axes", "Axes", "AxesPane"),
    ("compression", "Compression", "CompressionPane"),
    ("runs", "Runs", "RunsPane"),
    ("compare", "Compare", "ComparePane"),
)
_BY_CLASS = {cls: pane_id for pane_id, _, cls in PANE_NAMES}
_CLASS_OF = {pane_id: cls for pane_id, _, cls in PANE_NAMES}


def pane_class(pane_id: str) -> type[Pane]:
    """The pane's class, importing its module on first use."""
    module = importlib.import_module(f"{__name__}.{pane_id}")
    return getattr(module, _CLASS_OF[pane_id])


def __getattr__(name: str):
    """`PANES` (every pane class, in digit-key order) and the pane classes by name, imported
    when first asked for."""
    if name == "PANES":
        panes = tuple(pane_class(pane_id) for pane_id, _, _ in PANE_NAMES)
        globals()["PANES"] = panes
        return panes
    if name in _BY_CLASS:
        return pane_class(_BY_CLASS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PANES", "PANE_NAMES", "Pane", "pane_class"]  # noqa: F822 - PANES: __getattr__
