"""The rows of the item table (the Items pane, and the items behind a pair's gap split)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fragility_tui.tui.widgets import Column

if TYPE_CHECKING:
    import numpy as np

# Fragility, the figure the Items pane is about (frag>0.5 filters it), right after the item:
# at 80 columns it was off-screen behind benchmark and subject (issue 60).
ITEM_COLUMNS = [Column("item"), Column("fragility", "num"), Column("benchmark"), Column("subject"),
                Column("discrimination", "num"), Column("fragile models", "int"),
                Column("incomplete", "int"), Column("question", width=60)]


def item_rows(view, indices: np.ndarray) -> list[tuple[str, list]]:
    """The Items-pane rows of these item indices (precomputed with the view)."""
    table = view.item_table
    return [table[k] for k in indices.tolist()]
