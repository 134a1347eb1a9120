"""A grid's configs in one line: a character per config, grouped by axis (SPEC v5 §2b): our
runner's by order (o0 … o5) × format (L P D I, lower-case l p d for letter likelihood),
the two cloze configs, then each other harness's configs under its name, numbered 1…9, a…z
in canonical order (the legend names them). Used by the item drill-down (models × configs)
and the model drill-down (items × configs). Pure: Text in, Text out."""

from __future__ import annotations

import numpy as np
from rich.text import Text

from fragility_tui.harness.config_axes import derived_axes

CONFIG_SHORT = {"letter": "L", "paren": "P", "digit": "D", "instruct": "I",
                "cloze_qa": "q", "cloze_bare": "b"}
MODEL_WIDTH = 24  # the model column of the matrix: all 26 configs fit at 80 columns
NUMBERS = "123456789abcdefghijklmnopqrstuvwxyz"


def config_group(config_id: str) -> str:
    """The matrix's column group of a config: its order (o0 … o5), cloze, or the harness
    (another harness's, or a free-form id's: `other`)."""
    axes = derived_axes(config_id)
    if "order" in axes:
        return axes["order"]
    if "stem" in axes:
        return "cloze"
    return axes.get("harness", "other")


def short_config(config_id: str, rank: int = 0) -> str:
    """One-character column label: o3.paren → P (under the o3 group), o3.paren.lik → p,
    cloze_qa → q; another harness's config → its rank in its group (1…9, a…z)."""
    axes = derived_axes(config_id)
    if "format" in axes:
        label = CONFIG_SHORT[axes["format"]]
        return label.lower() if axes["scoring"] == "letter_lik" else label
    if "stem" in axes:
        return CONFIG_SHORT["cloze_" + axes["stem"]]
    return NUMBERS[rank] if rank < len(NUMBERS) else "…"


def short_labels(configs) -> dict[str, str]:
    """Every config's one-character label (a harness's configs numbered in their group)."""
    ranks: dict[str, int] = {}
    out = {}
    for config_id in configs:
        group = config_group(config_id)
        out[config_id] = short_config(config_id, ranks.get(group, 0))
        ranks[group] = ranks.get(group, 0) + 1
    return out


LEGEND_LIMIT = 160  # characters of numbered labels listed; past it the legend says where


def legend(configs) -> str:
    """What the numbered labels stand for (configs outside our runner's), or ''. Many of
    them (a grid of several harnesses' logs) would fill a small screen: then it says how
    they are numbered and that the cell under the cursor names its config."""
    labels = short_labels(configs)
    parts = [f"{labels[c]} {c}" for c in configs
             if config_group(c) not in ("cloze",) and "order" not in derived_axes(c)]
    text = " · ".join(parts)
    if len(text) <= LEGEND_LIMIT:
        return text
    return (f"{len(parts)} other configs numbered 1…9, a…z within each harness, in "
            "canonical order")


def model_width(columns: list[str | None], screen_width: int) -> int:
    """The model column: MODEL_WIDTH, narrower (down to 12) when the config columns would
    not fit the screen beside it."""
    return max(12, min(MODEL_WIDTH, screen_width - 4 - len(columns)))


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
    """The line above the matrix naming each column group, aligned with its cells: a label
    spans its gap and its run of cells only. A group can come back later in the columns
    (o0.letter.lik after the cloze configs), so its cells elsewhere must not widen it."""
    line = " " * model_width
    for k, config_id in enumerate(columns):
        if config_id is None:
            span = 1 + _run_length(columns, k + 1)
            line += (" " + config_group(columns[k + 1]))[:span].ljust(span)
    return Text(line, style="bold")


def _run_length(columns: list[str | None], start: int) -> int:
    """How many cell columns follow start before the next gap (or the end)."""
    end = start
    while end < len(columns) and columns[end] is not None:
        end += 1
    return end - start


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
    labels = short_labels([c for c in columns if c is not None])
    return "".join(" " if c is None else labels[c] for c in columns)
