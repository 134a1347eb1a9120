"""The 26 configs in one line: a character per config, grouped by order (o0 … o5) × format
(L P D I) and then the two cloze configs. Used by the item drill-down (models × configs)
and the model drill-down (items × configs). Pure: Text in, Text out."""

from __future__ import annotations

import numpy as np
from rich.text import Text

from fragility_tui.tui.cell_explain import bit_mark

CONFIG_SHORT = {"letter": "L", "paren": "P", "digit": "D", "instruct": "I",
                "cloze_qa": "q", "cloze_bare": "b"}
MODEL_WIDTH = 24  # the model column of the matrix: all 26 configs fit at 80 columns


def config_group(config_id: str) -> str:
    """The matrix's column group of a config: its order (o0 … o5), or cloze."""
    return config_id.split(".")[0] if "." in config_id else "cloze"


def short_config(config_id: str) -> str:
    """One-character column label: o3.paren → P (under the o3 group), cloze_qa → q."""
    return CONFIG_SHORT.get(config_id.split(".")[-1], config_id[:1])


def matrix_layout(configs: list[str]) -> list[str | None]:
    """The matrix's columns after the model column: a config id per cell column, None for
    the one-character gap before each group (o0 … o5 × L P D I, then the two cloze)."""
    columns: list[str | None] = []
    for config_id in configs:
        if not columns or config_group(config_id) != config_group(columns[-1]):
            columns.append(None)
        columns.append(config_id)
    return columns


def group_header(columns: list[str | None], model_width: int) -> Text:
    """The line above the matrix naming each column group, aligned with its cells."""
    line = " " * model_width
    for k, config_id in enumerate(columns):
        if config_id is None:
            group = config_group(columns[k + 1])
            span = 1 + sum(1 for c in columns[k + 1:] if c is not None
                           and config_group(c) == group)
            line += (" " + group)[:span].ljust(span)
    return Text(line, style="bold")


def compact_marks(bits: np.ndarray, present: np.ndarray, columns: list[str | None],
                  position: dict[str, int]) -> Text:
    """One model × one item across the configs: ✓/✗/· per config, a space per group gap
    (bits and present indexed by the cube's config order, `position`)."""
    line = Text()
    for config_id in columns:
        if config_id is None:
            line.append(" ")
        else:
            j = position[config_id]
            line.append_text(bit_mark(bool(bits[j]), bool(present[j])))
    return line


def config_letters(columns: list[str | None]) -> str:
    """The line under the group header: the one-character config labels, gaps as spaces."""
    return "".join(" " if c is None else short_config(c) for c in columns)
