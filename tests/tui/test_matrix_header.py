"""The group header above the item and model drill-downs' config matrix: each group's label
starts exactly over its group's first column, whatever the mix of configs. A group that comes
back later in the columns (starter-real's o0.letter+bos after the cloze configs, its .lik
configs after those) used to widen the label of its first run, drifting every label after it
to the right (`o0        o1      o2` over `LPDI LPDI LPDI`)."""

from __future__ import annotations

import pytest

from fragility_tui.harness.config_axes import LIK_IDS, PAPER_IDS
from fragility_tui.tui.config_matrix import config_group, group_header, matrix_layout

# the shipped starter-real grid's 48 configs, in its cube's order
STARTER_REAL = (list(PAPER_IDS) + ["o0.letter+bos", "o0.letter+nobos", "cloze_qa+bos",
                                   "cloze_qa+nobos"] + list(LIK_IDS))
IMPORTED = ["lm-eval:arc_easy:acc+k0", "lm-eval:arc_easy:acc_norm+k0",
            "inspect:arc[shuffle_choices=0]:choice"]


def label_positions(header: str, model_width: int, columns) -> list[tuple[int, str]]:
    """(first cell's column, group label) for every run of cells, read off the header."""
    found = []
    for k, config_id in enumerate(columns):
        if config_id is None:
            start = model_width + k + 1
            found.append((start, header[start:].split(" ", 1)[0]))
    return found


@pytest.mark.parametrize("configs", [list(PAPER_IDS), STARTER_REAL,
                                     STARTER_REAL + IMPORTED, list(LIK_IDS) + list(PAPER_IDS)],
                         ids=["paper", "starter-real", "with-imported", "lik-first"])
@pytest.mark.parametrize("model_width", [0, 24])
def test_each_label_starts_over_its_groups_first_column(configs, model_width):
    columns = matrix_layout(configs)
    header = group_header(columns, model_width).plain
    for k, config_id in enumerate(columns):
        if config_id is None:  # the gap before a run: blank, its label right after it
            assert header[model_width + k] == " ", (header, k)
    for start, label in label_positions(header, model_width, columns):
        group = config_group(columns[start - model_width])
        assert label and group.startswith(label), (header, start, group)
    assert len(header) == model_width + len(columns)


def test_starter_real_header_reads_like_its_letters():
    columns = matrix_layout(STARTER_REAL)
    assert group_header(columns, 0).plain == (
        " o0   o1   o2   o3   o4   o5   cl o0 cl o0  o1  o2  o3  o4  o5 ")
