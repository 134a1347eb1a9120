"""Pilot tests: every pane and its key paths, on a small synthetic store."""

from __future__ import annotations

import csv
import gc
from functools import partial

import pyarrow.parquet as pq
import pytest
from textual.widgets import DataTable, Input

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.view_model import Selection
from fragility_tui.tui.screens import HelpScreen, ItemScreen, ModelScreen, PairScreen
from fragility_tui.tui.widgets import ReportTable

from .conftest import SMALL, open_pane, screen_text, wait_listed, wait_ready, walk_checks

pytestmark = pytest.mark.anyio


def table(app, pane_id: str) -> ReportTable:
    return app.query_one(f"#{pane_id}", ReportTable) if pane_id.endswith("table") else \
        app.pane(pane_id).main_table()


async def test_one_app_walks_the_panes_drilldowns_filters_help_and_exports(
        synthetic_store, tmp_path, monkeypatch):
    """The read-only checks of this file on one app (issue 60: each started its own on the
    same store at the same size). In this order because each leaves the app as the next
    expects: a drill-down is left with Esc, a filter cleared; the Bands sort, which changes
    which model is on its first row, comes last."""
    monkeypatch.chdir(tmp_path)  # the screenshot and the exports land here
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        await walk_checks(app, pilot, check_header_badge_and_every_pane,
                          check_bands_enter_shows_the_model_configs_and_esc_goes_back,
                          check_pairs_enter_lists_items_behind_the_gap_then_item_drilldown,
                          check_item_drilldown_matrix_matches_the_cube,
                          check_items_filter_query,
                          check_help_lists_every_binding_and_palette_has_panes,
                          partial(check_copy_export_and_screenshot, tmp_path=tmp_path),
                          check_filter_and_sort_on_bands)
    check_the_exported_files(app, tmp_path)


async def check_header_badge_and_every_pane(app, pilot):
    text = screen_text(app)
    assert "grid: synthetic-small" in text and "SYNTHETIC" in text
    assert f"{SMALL['n_models']} models × {SMALL['n_items']} items × 26 configs" in text
    expected_rows = {"1": ("grids", 1), "2": ("bands", SMALL["n_models"]),
                     "3": ("pairs", SMALL["n_models"] - 1), "4": ("items", SMALL["n_items"]),
                     "5": ("axes", SMALL["n_models"] + 1), "6": ("compression", 10),
                     "7": ("runs", 0)}
    for key, (pane_id, rows) in expected_rows.items():
        await open_pane(app, pilot, key)
        assert app.query_one("#panes").current == pane_id
        assert table(app, pane_id).row_count == rows, pane_id
        if pane_id == "compression":  # 40 items: k = 100 cuts nothing, and says so
            assert "not compressed: k = 100 is not below the grid's 40 items" in \
                screen_text(app)
    await open_pane(app, pilot, "8")
    assert app.query_one("#panes").current == "compare"
    result = str(app.query_one("#compare-result").render())
    assert "observed" in result and "balanced" in result and "McNemar" in result
    assert table(app, "compare").row_count == 4  # one row per benchmark
    top = [b.band.model for b in app.view.report.bands[:2]]
    assert [app.query_one(f"#compare-{x}").value for x in "ab"] == top


async def check_bands_enter_shows_the_model_configs_and_esc_goes_back(app, pilot):
    await open_pane(app, pilot, "2")
    top_model = app.view.report.bands[0].band.model
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(app.screen, ModelScreen) and app.screen.model == top_model
    configs = app.screen.query_one(ReportTable)
    assert configs.row_count == 26
    first = configs.all_rows[0][1]
    assert first[0] == "o0.letter"
    assert first[1] == pytest.approx(app.view.report.bands[0].band.reference)
    await pilot.press("escape")
    await pilot.pause()
    assert not isinstance(app.screen, ModelScreen)
    assert app.query_one("#panes").current == "bands"


async def check_pairs_enter_lists_items_behind_the_gap_then_item_drilldown(app, pilot):
    await open_pane(app, pilot, "3")
    pair = app.view.report.pairs[0]
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(app.screen, PairScreen)
    assert (app.screen.a, app.screen.b) == (pair.a, pair.b)
    rows = app.screen.query_one(ReportTable).all_rows
    parts = [values[0] for _, values in rows]
    assert parts.count("stable: A only") == pair.a_only_stable
    assert parts.count("stable: B only") == pair.b_only_stable
    if rows:
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ItemScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PairScreen)
    await pilot.press("escape")
    await pilot.pause()
    assert app.query_one("#panes").current == "pairs"


async def check_item_drilldown_matrix_matches_the_cube(app, pilot):
    await open_pane(app, pilot, "4")
    await pilot.press("down", "enter")
    await app.workers.wait_for_complete()
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ItemScreen)
    k = app.view.cube.items.index(screen.item_uid)
    assert k == 1
    matrix = screen.query_one("#bit-matrix", DataTable)
    assert matrix.row_count == SMALL["n_models"]
    configs = list(app.view.cube.configs)
    assert [c.key.value for c in matrix.columns.values() if not c.key.value.startswith(
        ("model", "gap-"))] == configs  # all 26, one character each, canonical order
    for m, model in enumerate(app.view.cube.models):
        row = matrix.get_row(model)
        marks = [str(row[screen.column_of(c)]) for c in configs]
        expected = ["✓" if b else "✗" for b in app.view.cube.bits[m, k]]
        assert marks == expected, model
    await pilot.press("right")  # from o0.letter onto o0.paren
    await pilot.pause()
    detail = str(screen.query_one("#cell-detail").render())
    assert "× o0.paren" in detail and "(A) " in detail  # the re-rendered paren prompt
    assert len(screen.cells) == SMALL["n_models"] * 26
    await pilot.press("escape")  # back to the Items pane for the next check
    await pilot.pause()
    assert not isinstance(app.screen, ItemScreen)


async def check_items_filter_query(app, pilot):
    await open_pane(app, pilot, "4")
    await pilot.press("slash")
    box = app.query_one("#filter", Input)
    assert box.display and box.has_focus
    await pilot.press(*"bench:mmlu")
    await pilot.pause()
    items = table(app, "items")
    n_mmlu = int((app.view.cube.benchmarks == "mmlu").sum())
    assert items.row_count == n_mmlu > 0
    box.value = "frag>0.9"
    await pilot.pause()
    expected = int((app.view.fragility > 0.9).sum())
    assert items.row_count == expected
    model = app.view.cube.models[0]
    box.value = f"flips:{model}"
    await pilot.pause()
    assert items.row_count == int((app.view.classes[0] == 2).sum())
    await pilot.press("escape")
    await pilot.pause()
    assert not box.display and items.row_count == SMALL["n_items"]


async def check_filter_and_sort_on_bands(app, pilot):
    await open_pane(app, pilot, "2")
    bands = table(app, "bands")
    last = app.view.cube.models[-1]
    await pilot.press("slash", *last[-3:], "enter")
    await pilot.pause()
    assert bands.row_count == 1 and bands.current_values()[0] == last
    await pilot.press("escape")
    await pilot.pause()
    assert bands.row_count == SMALL["n_models"]
    await pilot.press("o", "o")  # sort by model, then reverse
    names = [v[0] for _, v in bands.shown_rows]
    assert names == sorted(names, reverse=True)


async def check_help_lists_every_binding_and_palette_has_panes(app, pilot):
    await pilot.press("f1")
    await pilot.pause()
    assert isinstance(app.screen, HelpScreen)
    help_table = app.screen.query_one(DataTable)
    rows = [" ".join(str(c) for c in help_table.get_row_at(k)) for k in range(help_table.row_count)]
    text = "\n".join(rows)
    from fragility_tui.tui.panes import PANES

    for b in FragilityApp.BINDINGS + ReportTable.BINDINGS:
        if b.key.isdigit():
            assert f"{b.key} {b.description}" in text  # the "1 … 8" row names each pane
        else:
            assert (b.tooltip or b.description) in text, b.key
    for pane in PANES:
        for b in pane.__dict__.get("BINDINGS", []):
            assert b.tooltip in text, (pane.title, b.key)
    await pilot.press("escape")
    await pilot.pause()
    assert not isinstance(app.screen, HelpScreen)
    await pilot.press("question_mark")
    await pilot.pause()
    assert isinstance(app.screen, HelpScreen)
    await pilot.press("escape")
    # the command palette offers every pane
    titles = [c.title for c in app.get_system_commands(app.screen)]
    assert all(f"Pane: {p.title} ({k + 1})" in titles for k, p in enumerate(PANES))
    await pilot.press("ctrl+p")
    await pilot.pause()
    await pilot.press(*"Pane: Compression")
    await pilot.pause(0.3)
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert app.query_one("#panes").current == "compression"


async def check_copy_export_and_screenshot(app, pilot, tmp_path):
    await open_pane(app, pilot, "2")
    await pilot.press("c")  # copy the current row (OSC 52)
    assert app.clipboard.split("\t")[0] == app.view.report.bands[0].band.model
    await pilot.press("C")  # copy the whole table
    lines = app.clipboard.strip().split("\n")
    assert lines[0].startswith("model\tref %") and len(lines) == SMALL["n_models"] + 1
    await pilot.press("P")  # SVG screenshot into the working directory
    await pilot.pause()
    shots = list(tmp_path.glob("fragility-*.svg"))
    assert len(shots) == 1 and "<svg" in shots[0].read_text()[:500]
    await open_pane(app, pilot, "3")
    for suffix in (".csv", ".parquet", ".md", ".xlsx", "-dir.csv/"):
        await pilot.press("x")
        await pilot.pause()
        box = app.screen.query_one("#export-path", Input)
        assert box.value.startswith("fragility-pairs-") and box.value.endswith(".csv")
        box.value = f"{tmp_path}/pairs{suffix}"
        await pilot.press("enter")
        await pilot.pause()
    assert any("unknown export format" in str(n.message) for n in app._notifications)
    # a path ending in / names a folder: refused, not written as the file before the slash
    assert any("names a folder" in str(n.message) for n in app._notifications)
    assert not (tmp_path / "pairs-dir.csv").exists()


def check_the_exported_files(app, tmp_path):
    """What check_copy_export_and_screenshot's exports wrote, read once the app is gone."""
    assert not (tmp_path / "pairs.xlsx").exists()
    pairs = app.view.report.pairs
    rows = list(csv.reader((tmp_path / "pairs.csv").open()))
    header = rows[0]
    assert header[:2] == ["A", "B"] and "gap Δ" in header and len(rows) == len(pairs) + 1
    assert int(rows[1][header.index("gap Δ")]) == pairs[0].gap
    t = pq.read_table(tmp_path / "pairs.parquet")
    assert t.num_rows == len(pairs) and t.column("gap Δ").to_pylist()[0] == pairs[0].gap
    lines = (tmp_path / "pairs.md").read_text().splitlines()
    assert lines[0].startswith("| A | B |") and "| gap Δ |" in lines[0]
    assert len(lines) == len(pairs) + 2


async def test_the_selection_form_then_a_selection_on_one_app(synthetic_store):
    """Both selection checks on one app (issue 60): the form's refusal and the selection it
    applies, then a selection chosen over it that every pane honours."""
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        await walk_checks(app, pilot, check_selection_form_refuses_to_drop_the_reference,
                          check_selection_is_honoured_by_every_pane)


async def check_selection_is_honoured_by_every_pane(app, pilot):
    await pilot.press("s")
    await pilot.pause()
    from fragility_tui.tui.screens import SelectionScreen

    assert isinstance(app.screen, SelectionScreen)
    await pilot.press("escape")
    await pilot.pause()
    gen = tuple(c for c in app.view.full.configs if not c.startswith("cloze"))
    models = app.view.full.models[:3]
    app.choose_selection(Selection(configs=gen, models=models, benchmarks=("mmlu", "arc_challenge")))
    await wait_ready(app, pilot)
    assert app.view.cube.shape == (3, int(sum(app.view.full.benchmarks != "hellaswag")
                                           - sum(app.view.full.benchmarks == "truthfulqa")), 24)
    assert "selection: 24/26 configs, 3/4 models, 2/4 benchmarks" in screen_text(app)
    await open_pane(app, pilot, "2")
    assert table(app, "bands").row_count == 3
    await open_pane(app, pilot, "4")
    from fragility_tui.tui.item_table import ITEM_COLUMNS

    at = [c.label for c in ITEM_COLUMNS].index("benchmark")
    assert {str(v[at]) for _, v in table(app, "items").all_rows} == {"mmlu", "arc_challenge"}
    await open_pane(app, pilot, "5")
    assert app.view.report.axes.mean["scoring"] is None  # no cloze in view


async def check_selection_form_refuses_to_drop_the_reference(app, pilot):
    await pilot.press("s")
    await pilot.pause()
    from textual.widgets import SelectionList

    configs = app.screen.query_one("#sel-configs", SelectionList)
    configs.deselect("o0.letter")
    await pilot.press("a")
    await pilot.pause()
    assert "the reference config o0.letter must be in view" in str(app.screen.query_one("#selection-error").render())
    configs.select("o0.letter")
    configs.deselect("cloze_qa")
    await pilot.press("a")
    await wait_ready(app, pilot)
    chosen = app.session.selection
    assert chosen.configs is not None and "cloze_qa" not in chosen.configs


async def test_grids_pane_opens_another_grid(synthetic_store, monkeypatch):
    from fragility_tui.store.importer import write_synthetic_grid
    from fragility_tui.grid.simulate import simulate

    write_synthetic_grid(synthetic_store, simulate(3, 30, 9), "second")
    from fragility_tui.tui.session import default_grid, start_grid_note

    grids = synthetic_store.list_grids()
    assert default_grid(grids) == "synthetic-small"  # the larger grid opens first
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "second")
    assert default_grid(grids) == "second" and start_grid_note(grids) is None
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "nope")  # a typo: said, not ignored
    assert default_grid(grids) == "synthetic-small"
    assert start_grid_note(grids) == ("FRAGILITY_TUI_GRID names no grid 'nope' in this store; "
                                      "opened synthetic-small instead (grids: "
                                      "synthetic-small, second)")
    monkeypatch.delenv("FRAGILITY_TUI_GRID")
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        assert app.view.grid == "synthetic-small"
        grids = table(app, "grids")
        assert grids.row_count == 2
        grids.select_key("second")
        await pilot.press("enter")
        await pilot.pause()
        await wait_ready(app, pilot)
        assert app.view.grid == "second" and app.view.cube.shape == (3, 30, 26)
        assert app.query_one("#panes").current == "bands"


async def test_empty_store_says_how_to_start_over_ssh_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("TEXTUAL_ANIMATIONS", raising=False)
    app = FragilityApp(str(tmp_path / "empty.duckdb"))
    assert app.no_color and app.animation_level == "none"  # NO_COLOR honoured, no animation
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_listed(app, pilot)
        assert "No grids in this store yet" in screen_text(app)
        await open_pane(app, pilot, "2")
        assert "no grid open" in screen_text(app)


async def test_first_start_shows_the_shipped_synthetic_and_real_grids(tmp_path, monkeypatch):
    """`make run` on a fresh machine: the app paints before the store is touched (no blank
    screen while the shipped grids load), then the Grids pane lists both, the real one with
    4 models x 265 items x 48 configs (the paper's 26 and 22 extension configs), complete."""
    from fragility_tui.cli import main

    db = tmp_path / "fresh.duckdb"
    started = []
    monkeypatch.setattr("fragility_tui.tui.app.FragilityApp.run",
                        lambda self: started.append((self, db.exists())))
    assert main(["--db", str(db)]) == 0
    assert gc.isenabled()  # paused for the app's start, on again though it never painted
    app, store_touched = started[0]
    assert not store_touched and app.gateway.load_samples  # the loading is the app's worker's
    statuses = []
    show_status = app.set_status
    app.set_status = lambda text: (statuses.append(text), show_status(text))
    async with app.run_test(size=(160, 40)) as pilot:
        assert "a first start loads the shipped grids" in screen_text(app)
        await wait_ready(app, pilot)
        progress = [t for t in statuses if "loading shipped grid" in t]
        assert [t.split(",")[0] for t in progress] == [
            "first start: loading shipped grid 1 of 2", "first start: loading shipped grid 2 of 2"]
        await open_pane(app, pilot, "1")
        text = screen_text(app)
        assert "synthetic-12x3679" in text and "SYNTHETIC" in text
        grids = {g.name: g for g in app.grids}
        real = grids["starter-real"]
        assert (real.models, real.items, real.configs, real.complete) == (4, 265, 48, True)
        assert "starter-real" in text and "real" in text


async def test_a_keymap_file_remaps_a_binding_by_its_id(synthetic_store, tmp_path, monkeypatch):
    monkeypatch.setenv("FRAGILITY_CONFIG_DIR", str(tmp_path))
    (tmp_path / "keymap.toml").write_text('[keymap]\n"app.help" = "h"\n"pane.items" = "i,4"\n')
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        await pilot.press("f1")  # the default key no longer opens the help
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("h")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert any(row[3] == "app.help" and row[0] == "h" for row in app.screen.rows)
        await pilot.press("escape")
        await pilot.press("i")
        await pilot.pause()
        assert app.query_one("#panes").current == "items"


async def test_a_bad_keymap_is_reported_and_the_defaults_stay(synthetic_store, tmp_path,
                                                              monkeypatch):
    monkeypatch.setenv("FRAGILITY_CONFIG_DIR", str(tmp_path))
    (tmp_path / "keymap.toml").write_text('[keymap]\n"app.help" = "h"\n"no.such" = "z"\n')
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        notes = [n.message for n in app._notifications]
        assert any("'no.such' is not a binding id" in n and "keymap.toml" in n for n in notes)
        (tmp_path / "keymap.toml").write_text('[keymap\n')
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        assert any("line 1" in n.message for n in app._notifications)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_synthetic_item_drilldown_shows_the_true_parameters(synthetic_store, tmp_path):
    """A synthetic grid keeps what the generator drew: the item drill-down shows the item's
    2PL difficulty and discrimination and each model's true rank and abilities, and the
    cell detail the option the model chose."""
    from fragility_tui.grid.simulate import GENERATOR_VERSION, simulate

    truth = simulate(**SMALL).truth
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "4")
        await pilot.press("down", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        k = app.view.cube.items.index(screen.item_uid)
        text = str(screen.query_one("#item-text").render())
        assert f"True parameters (SYNTHETIC generator v{GENERATOR_VERSION})" in text
        assert f"difficulty b {truth.difficulty[k]:+.2f}" in text
        assert f"discrimination a {truth.discrimination[k]:.2f}" in text
        best = int(truth.ability.argmax())
        line = next(row for row in text.splitlines() if row.endswith(app.view.cube.models[best]))
        assert line.split()[:2] == ["1", f"{truth.ability[best]:+.2f}"]
        detail = str(screen.query_one("#cell-detail").render())
        assert "prediction: native choice" in detail
        app.save_screenshot(str(tmp_path / "item.svg"))


async def test_the_terminal_app_turns_the_collector_back_on_and_freezes_each_view(
        synthetic_store):
    """cli.main pauses the collector for the app's start; the first frame ends the pause
    and freezes the start's long-lived objects out of later collections, and so does each
    computed view (gc.get_objects lists only the objects collections still scan)."""
    from fragility_tui.tui.entry import TerminalApp

    gc.disable()
    try:
        app = TerminalApp(str(synthetic_store.path))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert gc.isenabled() and gc.get_freeze_count() > 0
            await wait_ready(app, pilot)
            await pilot.pause()
            assert not any(o is app.view for o in gc.get_objects())
    finally:
        gc.unfreeze()  # this test process makes many apps: none of them may stay frozen
        gc.enable()


async def test_quitting_at_the_first_frame_exits_cleanly(synthetic_store):
    """A quit, or a terminal that hangs up, right at the first frame, before the panes and
    the footer composed after it are mounted: the app exits with its code instead of
    Textual's MountError traceback (the screen is gone when their mount comes)."""
    from pathlib import Path

    import fragility_tui.tui.app as app_module

    class QuitAtOnce(FragilityApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))

        def on_ready(self) -> None:
            self.exit(return_code=3)

    app = QuitAtOnce(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
    assert app.return_code == 3


async def test_a_plot_is_drawn_again_only_when_its_size_changes(synthetic_store, monkeypatch):
    """Compression's scatter is drawn when its view arrives and again when the terminal
    resizes; showing the pane again (a Resize at the same size) does not redraw it."""
    from fragility_tui.tui import plots

    sizes = []
    draw = plots.draw_item_scatter

    def counted(plot, discrimination, fragility):
        sizes.append(tuple(plot.size))
        return draw(plot, discrimination, fragility)

    monkeypatch.setattr(plots, "draw_item_scatter", counted)
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "6")
        await pilot.pause(0.2)
        drawn = len(sizes)
        assert drawn >= 1 and sizes[-1][0] > 0
        for key in "2626":
            await open_pane(app, pilot, key)
            await pilot.pause(0.2)
        assert len(sizes) == drawn  # shown again at the same size: not drawn again
        await pilot.resize_terminal(100, 36)
        await pilot.pause(0.3)
        assert len(sizes) > drawn and sizes[-1][0] < 118  # drawn at the new width
