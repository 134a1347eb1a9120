"""What 80 columns cut, and what the item matrix's legend and Compare's x axis name, on the
shipped real grid and on a grid of other harnesses' configs (one app session each; the
pure parts below without an app).

Seen at 80×24 before: the footer's `x Exp▏^p palette` and `q Qui▏`, a status line that lost
`F1 help`, Items' `earth_scien` and the model drill-down's `fragil` with no ellipsis, a
legend of `L letter P paren…` on a grid with none of those configs (and `6 other configs
numbered 1…9, a…z` for six), starter-real's `+bos`/`+nobos` columns unexplained (`LL`),
Compare's x labels run together (`cl o0cl o0`) with none for imported configs, no picker
focused on opening Compare, and the Pairs stable-set line cut at `+2 of the gap on`."""

from __future__ import annotations

import re
from functools import partial

import pytest

from fragility_tui.harness.config_axes import LIK_IDS, PAPER_IDS
from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.chrome import fit_status
from fragility_tui.tui.config_matrix import legend
from fragility_tui.tui.cut_edge import mark_cut
from fragility_tui.tui.plots import ConfigAxis, config_tick_label

from .conftest import (assert_footer_whole, footer_and_status, open_pane, screen_lines,
                       screen_text, wait_ready, wait_while, walk_checks)

pytestmark = pytest.mark.anyio

STARTER_REAL = (list(PAPER_IDS) + ["o0.letter+bos", "o0.letter+nobos", "cloze_qa+bos",
                                   "cloze_qa+nobos"] + list(LIK_IDS))
IMPORTED = ["helm:mmlu:exact_match+k0", "inspect:fragility_mc:choice",
            "lm-eval:fragility_starter:acc+k0", "lm-eval:fragility_starter:acc+k5",
            "lm-eval:fragility_starter:acc_norm+k0", "lm-eval:fragility_starter:acc_norm+k5"]


# ---------------------------------------------------------------- without an app
def test_the_legend_names_only_what_the_matrix_shows():
    text = legend(IMPORTED)
    assert "o0" not in text and "letter" not in text and "cloze" not in text
    assert "other configs" not in text  # six are named, not counted
    assert "lm-eval:fragility_starter: 1 acc+k0 2 acc+k5 3 acc_norm+k0 4 acc_norm+k5" in text
    assert "inspect: 1 fragility_mc:choice" in text and "helm: 1 mmlu:exact_match+k0" in text
    only_o0 = legend(["o0.letter", "o0.paren"])
    assert "under o0: L letter P paren" in only_o0 and "digit" not in only_o0
    assert "cl:" not in only_o0
    # starter-real: the second o0 and cl runs are told apart from the first
    real = legend(STARTER_REAL)
    assert "o0 LL: +bos, +nobos · cl qq: +bos, +nobos" in real
    assert "+bos/+nobos: a BOS token put first/removed" in real
    assert "l p d: letter likelihood" in real


def test_the_status_line_keeps_f1_help():
    text = ("selection: everything · reference lm-eval:fragility_starter:acc+k0 · ready · "
            "s changes the selection · F1 help")
    shown = fit_status(text, 78).plain
    assert shown.endswith(" · ready · F1 help") and len(shown) <= 78
    assert fit_status("selection: everything · ready · F1 help", 78).plain == \
        "selection: everything · ready · F1 help"


def test_a_word_cut_by_the_table_edge_ends_in_an_ellipsis():
    from rich.text import Text

    # the 11th column, the last on screen, holds the ellipsis
    assert mark_cut(Text("a earth_science b"), 11).plain == "a earth_sc…ence b"
    assert mark_cut(Text("a earth  b"), 7).plain == "a earth  b"  # cut between words


class FakePlot:
    """A laid-out plot `columns` wide per config, as PlotWidget maps x to a column."""

    def __init__(self, columns: float):
        self.columns = columns
        self.size = type("Size", (), {"width": 100})()

    def get_pixel_from_coordinate(self, x: float, y: float) -> tuple[int, int]:
        return int((x + 0.5) * self.columns), 0


@pytest.mark.parametrize("columns", [1.0, 1.4, 5.0])
def test_config_ticks_label_imported_configs_and_never_touch(columns):
    assert [config_tick_label(c) for c in IMPORTED[:3]] == ["helm", "insp", "lm"]
    configs = STARTER_REAL + IMPORTED
    axis = ConfigAxis(configs, FakePlot(columns))  # 1.4: 48 configs at 80 columns
    ticks = axis.get_ticks(-0.5, len(configs) - 0.5)
    labels = axis.get_labels_for_ticks(ticks)
    spans = [axis._span(int(t), label) for t, label in zip(ticks, labels)]
    assert all(left > right + 1 for (_, right), (left, _) in zip(spans, spans[1:]))
    assert labels[0] == "o0"
    if columns == 5.0:  # room for every group's label
        assert labels == ["o0", "o1", "o2", "o3", "o4", "o5", "cl", "o0", "cl", "o0", "o1",
                          "o2", "o3", "o4", "o5", "helm", "insp", "lm"]


# ---------------------------------------------------------------- starter-real at 80×24
async def test_the_shipped_real_grid_at_80_columns(shipped_store, monkeypatch):
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "starter-real")
    app = FragilityApp(str(shipped_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot, timeout=120)
        assert app.view.grid == "starter-real"
        await walk_checks(app, pilot, check_items_subject_ends_in_an_ellipsis,
                          check_the_model_drilldown_shows_the_class_whole,
                          check_the_bos_columns_are_explained,
                          check_the_selection_form_shows_a_cut_name_whole,
                          check_compare_focuses_a_picker_and_spaces_its_ticks)


BARS = "│ ▏▎▍▌▋▊▉█▁▂▃▄▅▆▇▔▕"  # the border and a scrollbar's glyphs, right of a row


async def check_items_subject_ends_in_an_ellipsis(app, pilot):
    pane = await open_pane(app, pilot, "4")
    assert_footer_whole(app)
    assert footer_and_status(app)[1].rstrip().endswith("F1 help")
    subjects = {values[3] for _, values in pane.main_table().all_rows}
    rows = [line.rstrip(BARS) for line in screen_lines(app) if line.startswith("│starter_")]
    assert rows and all(line.endswith("…") or line.split()[-1] in subjects for line in rows)
    assert any(line.endswith("…") for line in rows), rows  # earth_scie…, not earth_scien


async def check_the_model_drilldown_shows_the_class_whole(app, pilot):
    from fragility_tui.tui.screens import ModelScreen

    await open_pane(app, pilot, "2")
    await pilot.press("enter")
    await wait_while(app, pilot, lambda: not isinstance(app.screen, ModelScreen), 10,
                     "no model drill-down")
    await pilot.pause()
    app.screen.query_one("#model-items").focus()
    await pilot.pause()
    rows = [line for line in screen_lines(app) if "/48" in line]
    assert rows and all(re.search(r"(robust [✓✗]|fragile|incomplete) +\d+/48 ", line)
                        for line in rows), rows
    assert_footer_whole(app)
    await pilot.press("escape")
    await pilot.pause()


async def first_item_drilldown_text(app, pilot) -> str:
    """The Items pane's first item opened: its drill-down's screen, one line of words."""
    from fragility_tui.tui.screens import ItemScreen

    await open_pane(app, pilot, "4")
    await pilot.press("enter")
    await wait_while(app, pilot, lambda: not isinstance(app.screen, ItemScreen), 10,
                     "no item drill-down")
    await pilot.pause()
    return " ".join(screen_text(app).split())


async def check_the_bos_columns_are_explained(app, pilot):
    text = await first_item_drilldown_text(app, pilot)
    assert "o0 LL: +bos, +nobos · cl qq: +bos, +nobos" in text
    assert "a BOS token put first/removed" in text
    await pilot.press("escape")
    await pilot.pause()


async def check_the_selection_form_shows_a_cut_name_whole(app, pilot):
    from textual.widgets import SelectionList

    await pilot.press("s")
    await pilot.pause()
    models = app.screen.query_one("#sel-models", SelectionList)
    models.focus()
    models.highlighted = 3
    await pilot.pause()
    text = screen_text(app)
    name = models.get_option_at_index(3).value
    assert name == "smollm2-135m-instruct+int8" and "smollm…" in text  # cut in its list
    assert f"models: {name}" in text  # whole below the lists
    await pilot.press("escape")
    await pilot.pause()


async def check_compare_focuses_a_picker_and_spaces_its_ticks(app, pilot):
    pane = await open_pane(app, pilot, "8")
    assert app.focused is pane.query_one("#compare-a")  # Enter opens it at once
    await pilot.press("g")  # the plot instead of the table (80×24)
    await pilot.pause(0.3)
    lines = screen_lines(app)
    axis = next(k for k, line in enumerate(lines) if "┗" in line)
    labels = lines[axis + 1]
    assert re.search(r"o0 +o1 +o2", labels) and not re.search(r"\S\S\S", labels[12:-1]), \
        labels  # two-letter labels, a blank column between any two
    await pilot.press("g")
    await pilot.pause()


# ---------------------------------------------------------------- imported configs at 80×24
@pytest.fixture
def imported_store(tmp_path):
    """Two models under six configs of three other harnesses (as import-log names them);
    model b has no cell under the last config for ten items (the incomplete gap's)."""
    from fragility_tui.store.importer import import_long_grid
    from fragility_tui.store.store import Store

    store = Store(tmp_path / "s.duckdb")
    rows = ["model,item,config,correct,benchmark"]
    for m, model in enumerate(("model-a", "model-b")):
        for i in range(40):
            for k, config in enumerate(IMPORTED):
                if model == "model-b" and config == IMPORTED[-1] and i < 10:
                    continue
                rows.append(f"{model},q{i},{config},{int((i * 7 + k * 3 + m * 5) % 4 < 2)},"
                            "bench")
    (tmp_path / "logs.csv").write_text("\n".join(rows) + "\n")
    import_long_grid(store, tmp_path / "logs.csv", "logs")
    return store


async def test_a_grid_of_other_harnesses_configs_at_80_columns(imported_store):
    app = FragilityApp(str(imported_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await walk_checks(app, pilot, check_the_status_keeps_f1_help_beside_a_long_reference,
                          check_the_legend_names_the_imported_configs,
                          check_the_pairs_detail_wraps,
                          check_the_pair_drilldown_lists_the_incomplete_split,
                          check_imported_configs_get_tick_labels)


async def check_the_status_keeps_f1_help_beside_a_long_reference(app, pilot):
    await open_pane(app, pilot, "2")
    status = footer_and_status(app)[1].rstrip()
    assert "reference helm:mmlu:exact_match+k0" in status and status.endswith("F1 help")
    assert_footer_whole(app)


async def check_the_legend_names_the_imported_configs(app, pilot):
    text = await first_item_drilldown_text(app, pilot)
    assert "lm-eval:fragility_starter: 1 acc+k0 2 acc+k5 3 acc_norm+k0 4 acc_norm+k5" in text
    assert "under o0" not in text and "cloze" not in text
    assert "other configs numbered" not in text
    await pilot.press("escape")
    await pilot.pause()


async def check_the_pairs_detail_wraps(app, pilot):
    pane = await open_pane(app, pilot, "3")
    pair = app.view.report.pairs[0]
    assert pair.incomplete_gap
    text = " ".join(screen_text(app).split())
    assert f"{pair.incomplete_gap:+d} of the gap on items with a missing cell" in text
    assert str(pane.query_one("#pairs-detail").render()).startswith("stable set: ")


async def check_the_pair_drilldown_lists_the_incomplete_split(app, pilot):
    """A gap on items one model lacks a cell of: the drill-down showed three parts of 0
    and an empty table; it lists those items as the incomplete split."""
    from fragility_tui.tui.screens import PairScreen

    pair = app.view.report.pairs[0]  # the Pairs pane is open, its first row the cursor's
    await pilot.press("enter")
    await wait_while(app, pilot, lambda: not isinstance(app.screen, PairScreen), 10,
                     "no pair drill-down")
    await pilot.pause()
    text = " ".join(screen_text(app).split())
    table = app.screen.query_one("#pair-items")
    parts = [table.get_row_at(k)[0] for k in range(table.row_count)]
    assert "incomplete split" in text and "incomplete split" in [str(p) for p in parts]
    assert pair.incomplete_gap
    await pilot.press("escape")
    await pilot.pause()


async def check_imported_configs_get_tick_labels(app, pilot):
    await open_pane(app, pilot, "8")
    await pilot.press("g")
    await pilot.pause(0.3)
    lines = screen_lines(app)
    axis = next(k for k, line in enumerate(lines) if "┗" in line)
    assert re.search(r"helm +insp +lm", lines[axis + 1]), lines[axis + 1]
    assert "helm: helm · insp: inspect · lm: lm-eval" in screen_text(app)
    await pilot.press("g")
    await pilot.pause()
