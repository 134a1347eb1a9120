"""A grid's configs in one line: a character per config, grouped by axis (SPEC v5 §2b): our
runner's by order (o0 … o5) × format (L P D I, lower-case l p d for letter likelihood),
the two cloze configs, then each other harness's configs under its name, numbered 1…9, a…z
in canonical order; the legend names only what the matrix shows. Used by the item
drill-down (models × configs) and the model drill-down (items × configs). Pure: Text in,
Text out."""

from __future__ import annotations

import numpy as np
from rich.text import Text

from fragility_tui.harness.config_axes import derived_axes, runner_parts

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


LEGEND_LIMIT = 240  # characters naming other harnesses' configs; past it the legend says where
FORMAT_NAMES = {"L": "letter", "P": "paren", "D": "digit", "I": "instruct"}
CLOZE_NAMES = {"q": "cloze_qa", "b": "cloze_bare"}
MODIFIER_NAMES = {"bos": "+bos/+nobos: a BOS token put first/removed",
                  "template": "+raw/+chat: the prompt without/through the chat template",
                  "shots": "+kN: N solved examples first"}


def legend(configs) -> str:
    """What the matrix's letters stand for: only the groups and letters it shows (a grid
    imported from other harnesses' logs has no o0…o5 or cloze columns), which of our
    runner's configs a repeated letter stands for (starter-real's o0.letter+bos and +nobos
    come back as `LL` under a second `o0`), and the other harnesses' configs by number, or
    where to find their names when they are too many to list."""
    configs = list(configs)
    labels = short_labels(configs)
    parts = ["✓ correct ✗ wrong · missing"]
    ours = [c for c in configs if "order" in derived_axes(c)]
    if ours:
        parts.append(f"under {_orders(ours)}: " + _format_letters({labels[c] for c in ours}))
    cloze = [labels[c] for c in configs if config_group(c) == "cloze"]
    if cloze:
        parts.append("cl: " + " ".join(f"{k} {CLOZE_NAMES[k]}" for k in CLOZE_NAMES
                                       if k in cloze))
    modified = _modified_runs(configs, labels)
    if modified:
        parts.append(modified)
    others = _other_configs(configs, labels)
    if others:
        parts.append(others)
    return " │ ".join(parts)


def _orders(configs) -> str:
    """o0…o5, o0…o2, o3 or o0, o3: the orders among the configs."""
    orders = sorted({derived_axes(c)["order"] for c in configs})
    numbers = [int(o[1:]) for o in orders]
    if len(orders) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{orders[0]}…{orders[-1]}"
    return ", ".join(orders)


def _format_letters(shown: set[str]) -> str:
    text = " ".join(f"{k} {name}" for k, name in FORMAT_NAMES.items() if k in shown)
    lower = [k.lower() for k in FORMAT_NAMES if k.lower() in shown]
    if lower:
        text += (" · " if text else "") + " ".join(lower) + ": letter likelihood"
    return text


def _suffix(config_id: str) -> str:
    """A runner config's modifiers (`+bos`, `+nobos+chat`), '' for none or another id."""
    parts = runner_parts(config_id)
    return config_id[len(parts[0]):] if parts is not None else ""


def _modified_runs(configs: list[str], labels: dict[str, str]) -> str:
    """The runs of cells that hold configs with modifiers, each with its configs' modifiers
    left to right (`o0 LL: +bos, +nobos`): their letter alone reads like the base config's.
    Runs whose configs all carry one modifier are named together (`o0 o1 cl: +nobos`)."""
    columns = matrix_layout(configs)
    entries: list[tuple[str, str]] = []
    present: set[str] = set()
    for start, config_id in enumerate(columns):
        if config_id is not None:
            continue
        run = columns[start + 1:start + 1 + _run_length(columns, start + 1)]
        suffixes = [_suffix(c) for c in run]
        if not any(suffixes):
            continue
        present.update(axis for c in run for axis, level in derived_axes(c).items()
                       if axis in MODIFIER_NAMES and level not in ("default", "0"))
        group = "cl" if config_group(run[0]) == "cloze" else config_group(run[0])
        if len(set(suffixes)) == 1:
            entry = (group, suffixes[0])
        else:
            entry = (f"{group} {''.join(labels[c] for c in run)}",
                     ", ".join(s or "plain" for s in suffixes))
        if entries and entries[-1][1] == entry[1] and len(set(suffixes)) == 1:
            entries[-1] = (f"{entries[-1][0]} {entry[0]}", entry[1])
        else:
            entries.append(entry)
    if not entries:
        return ""
    named = " · ".join(f"{where}: {what}" for where, what in entries)
    meaning = "; ".join(MODIFIER_NAMES[axis] for axis in MODIFIER_NAMES if axis in present)
    return f"with modifiers, {named}" + (f" ({meaning})" if meaning else "")


def _other_configs(configs: list[str], labels: dict[str, str]) -> str:
    """Other harnesses' configs by their number, per harness, the part of the id every
    config of the harness shares said once (`lm-eval:arc_easy: 1 acc+k0 2 acc_norm+k0`);
    too many to list: how they are numbered and where each is named."""
    groups: dict[str, list[str]] = {}
    for c in configs:
        if config_group(c) != "cloze" and "order" not in derived_axes(c):
            groups.setdefault(config_group(c), []).append(c)
    if not groups:
        return ""
    parts = []
    for group, ids in groups.items():
        split = [c.split(":") for c in ids]
        shared = 0  # leading ":"-parts every id of the harness shares, one part kept apart
        while all(len(s) > shared + 1 and s[shared] == split[0][shared] for s in split) \
                and (len(ids) > 1 or shared < 1):
            shared += 1
        head = ":".join(split[0][:shared]) or group
        parts.append(f"{head}: " + " ".join(
            f"{labels[c]} {':'.join(s[shared:])}" for c, s in zip(ids, split)))
    text = " · ".join(parts)
    if len(text) <= LEGEND_LIMIT:
        return text
    n = sum(len(ids) for ids in groups.values())
    return (f"{n} other configs numbered 1…9, a…z per harness: the cell under the cursor "
            "names its config")


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
