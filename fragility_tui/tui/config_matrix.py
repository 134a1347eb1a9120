"""The 26 configs in one line: a character per config, grouped by order (o0 … o5) × format
(L P D I) and then the two cloze configs. Used by the item drill-down (models × configs)
and the model drill-down (items × configs). Pure: Text in, Text out."""

from __future__ import annotations

import numpy as np
from rich.text import Text

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


def compact_rows(bits: np.ndarray, present: np.ndarray, columns: list[str | None],
                 position: dict[str, int]) -> list[str]:
    """One model's items across the configs, a plain string per item: ✓/✗/· per config and
    a space per group gap (bits, present: [item, config] in the cube's config order). Built
    vectorised; widgets.mark_text colours a row when it is drawn."""
    marks = np.where(present, np.where(bits, "✓", "✗"), "·")
    layout = np.array([position[c] if c is not None else -1 for c in columns])
    cells = np.where(layout >= 0, marks[:, np.maximum(layout, 0)], " ")
    return ["".join(row) for row in cells.tolist()]


def config_letters(columns: list[str | None]) -> str:
    """The line under the group header: the one-character config labels, gaps as spaces."""
    return "".join(" " if c is None else short_config(c) for c in columns)
