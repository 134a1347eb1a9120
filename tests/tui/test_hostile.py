"""Untrusted text (item text, model names, model output) viewed in every pane: no crash,
shown literally, and no escape, control or bidi character reaches the terminal."""

from __future__ import annotations

import re

import pytest

from fragility_tui.harness.configs import CONFIG_IDS, get_config, perm_to_str, permutation_for
from fragility_tui.items.item import Item
from fragility_tui.store.store import CellRow, Store
from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.screens import ItemScreen, PairScreen

from .conftest import open_pane, screen_lines, terminal_bytes, wait_ready

pytestmark = pytest.mark.anyio

HOSTILE = ("[bold]B[/] [link=x]click[/link] \x1b[31mCSI-red\x1b[0m "
           "\x1b]8;;https://evil.example\x07OSC-link\x1b]8;;\x07 "
           "\x1b]52;c;aGVsbG8=\x07 \u202eevil-bidi\u202c \x00NUL \x9b2J \r")
MEGABYTE = "M" * 1_000_000
# What must never reach the terminal as text: ESC, other C0/C1 controls, bidi controls.
FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_store(path) -> Store:
    store = Store(path)
    store.create_grid("hostile [bold]grid[/]", description=HOSTILE)
    items = [
        Item("mmlu/h1", "mmlu", "[red]subject[/]", HOSTILE, (HOSTILE, "b [/]", "c", "d"), 0),
        Item("mmlu/h2", "mmlu", None, MEGABYTE, ("a", MEGABYTE, "c\x1b[2J", "d"), 1),
        Item("arc/h3\x1b[31m", "arc", None, "plain question", ("a", "b", "c", "d"), 2),
    ]
    store.add_items("hostile [bold]grid[/]", items)
    models = ["[bold]model-a[/]", "model-b\x1b[31m", "model-c\u202e"]
    rows = []
    for m, model in enumerate(models):
        store.upsert_model("hostile [bold]grid[/]", model, source=HOSTILE)
        for k, item in enumerate(items):
            for c, config_id in enumerate(CONFIG_IDS):
                likelihood = get_config(config_id).scoring == "likelihood"
                rows.append(CellRow(
                    model, item.item_uid, config_id, correct=(m + k + c) % 3 == 0,
                    pred=(m + c) % 4 if (m + c) % 5 else -1,
                    permutation=None if likelihood else perm_to_str(
                        permutation_for(0, item.item_uid, config_id)),
                    raw_output=None if likelihood else (MEGABYTE if (m, k, c) == (0, 1, 0) else HOSTILE),
                    scores=[-1.5, -2.0, -0.5, -3.0] if likelihood else None,
                    tokens=5, ms=1.0, run_id=HOSTILE[:20]))
    store.write_cells("hostile [bold]grid[/]", rows)
    store.create_run({"grid": "hostile [bold]grid[/]", "model": models[0], "status": HOSTILE,
                      "spec": {"note": HOSTILE}, "provenance": {"x": HOSTILE},
                      "events_path": None})
    return store


# Textual's own output: CSI sequences (colours, cursor moves). Anything else starting with
# ESC (OSC, DCS, a lone ESC) could only have come from grid text.
OWN_CSI = re.compile(r"\x1b\[[0-9;:?<=>]*[ -/]*[@-~]")


def assert_clean_screen(app, where: str) -> str:
    lines = screen_lines(app)
    text = "\n".join(lines)
    bad = FORBIDDEN.search(text)
    assert bad is None, f"{where}: {bad.group()!r} reached the terminal"
    leftover = OWN_CSI.sub("", terminal_bytes(app))
    assert "\x1b" not in leftover and "\x07" not in leftover, f"{where}: a raw escape"
    return text


async def test_hostile_text_in_every_pane(tmp_path):
    store = hostile_store(tmp_path / "hostile.duckdb")
    app = FragilityApp(str(store.path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        text = assert_clean_screen(app, "grids")
        assert "hostile [bold]grid[/]" in text  # the grid name, literally
        for key in "2345678":
            await open_pane(app, pilot, key)
            text = assert_clean_screen(app, f"pane {key}")
            if key == "2":
                assert "[bold]model-a[/]" in text and "model-b␛[31m" in text
            if key == "4":
                assert "[bold]B[/]" in text
        # Runs: the provenance card of a run whose fields are hostile
        await open_pane(app, pilot, "7")
        # not poll().wait(): the pane's once-a-second poll can replace that exclusive worker
        for _ in range(100):  # (WorkerCancelled); wait for the rows instead
            if app.pane("runs").runs:
                break
            await pilot.pause(0.1)
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        text = assert_clean_screen(app, "provenance")
        assert "␛]52;c;aGVsbG8=␇" in text  # the OSC 52 attempt, defused and visible
        await pilot.press("escape")
        # Items: drill into every item and walk every cell of the first model's row
        await open_pane(app, pilot, "4")
        for row in range(3):
            app.pane("items").main_table().move_cursor(row=row)
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert isinstance(app.screen, ItemScreen)
            if row == 1:  # the 1 MB question, choice and raw output (o0.letter) are cut
                assert "more characters not shown" in str(app.screen.query_one("#item-text").render())
                assert "more characters not shown" in str(app.screen.query_one("#cell-detail").render())
            matrix = app.screen.query_one("#bit-matrix")
            for model_row, config in ((0, "o0.letter"), (1, "o1.paren"), (2, "cloze_qa"),
                                      (0, "cloze_bare")):  # generation and cloze cells
                column = app.screen.column_of(config)
                matrix.move_cursor(row=model_row, column=column)
                await pilot.pause()
                text = assert_clean_screen(app, f"item {row}, cell {model_row},{column}")
                if row == 0 and config == "o0.letter":
                    assert "[link=x]click[/link]" in text
            await pilot.press("escape")
            await pilot.pause()
        # Pairs drill-down lists the same hostile items
        await open_pane(app, pilot, "3")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PairScreen)
        assert_clean_screen(app, "pair items")


async def test_cell_detail_shows_output_literally(tmp_path):
    from fragility_tui.tui.cell_explain import cell_detail

    store = hostile_store(tmp_path / "hostile.duckdb")
    item, _, plain = store.load_items("hostile [bold]grid[/]")
    cells = store.item_cells("hostile [bold]grid[/]", item.item_uid)
    cell = next(c for c in cells if c["config_id"] == "o1.paren")
    text = cell_detail(item, cell["model"], "o1.paren", cell, seed=0)
    assert "[bold]B[/] [link=x]click[/link] ␛[31mCSI-red␛[0m" in text.plain
    assert not text.spans or all(s.style for s in text.spans)  # only our own styling
    assert FORBIDDEN.search(text.plain) is None
    assert "parse: " in text.plain  # the parser's explanation of the raw output
    cells = store.item_cells("hostile [bold]grid[/]", plain.item_uid)
    cloze = next(c for c in cells if c["config_id"] == "cloze_qa")
    text = cell_detail(plain, cloze["model"], "cloze_qa", cloze, seed=0)
    assert "option scores" in text.plain and "→ 2:" in text.plain  # best per character
