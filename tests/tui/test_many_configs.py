"""A grid of 60 configs (the paper set, the 18 letter-likelihood configs and 16 imported
from four harnesses) stays usable at 80×24: the item matrix groups its columns by order,
cloze and harness and narrows the model column so the groups fit, the legend stays short,
the Axes pane shows the harness axis, and the selection form picks configs by axis level."""

from __future__ import annotations

import csv
import random

import pytest

from fragility_tui.harness.config_axes import LIK_IDS, PAPER_IDS
from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.config_matrix import config_letters, legend, matrix_layout

from .conftest import open_pane, screen_text, wait_ready

pytestmark = pytest.mark.anyio
IMPORTED = ([f"lm-eval:arc_easy:{m}+k{k}" for m in ("acc", "acc_norm") for k in (0, 5, 25)]
            + [f"inspect:arc[shuffle_choices={s}]:choice" for s in range(5)]
            + [f"lighteval:arc:{m}+k0" for m in ("acc", "acc_norm")]
            + [f"helm:mmlu:exact_match+k{k}" for k in (0, 5, 10)])
CONFIGS = list(PAPER_IDS) + list(LIK_IDS) + IMPORTED


@pytest.fixture
def sixty(tmp_path):
    from helpers import run_cli

    rng = random.Random(0)
    path = tmp_path / "g60.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "item", "config", "correct", "benchmark", "axis_harness"])
        for m, skill in (("smollm2-135m-instruct", 0.5), ("gemma3-270m", 0.4),
                         ("llama-3.2-1b-instruct", 0.65)):
            for i in range(20):
                for c in CONFIGS:
                    w.writerow([m, f"arc/q{i}", c, int(rng.random() < skill), "arc", ""])
    db = tmp_path / "s.duckdb"
    run_cli("import", str(path), "--grid", "g60", db=db, check=True)
    return db


def test_the_matrix_groups_sixty_configs_by_axis():
    from fragility_tui.harness.config_axes import canonical_order

    columns = matrix_layout(canonical_order(CONFIGS))
    letters = config_letters(columns)
    assert letters.startswith(" LPDI LPDI") and " qb lpd " in letters
    assert letters.endswith(" 123 12345 12 123456")  # helm, inspect, lighteval, lm-eval
    others = legend(CONFIGS).rsplit(" │ ", 1)[-1]  # 16 long ids: how they are numbered
    assert len(others) < 100 and others.startswith("16 other configs")


async def test_sixty_configs_at_80x24(sixty):
    app = FragilityApp(str(sixty))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        assert "60 configs" in screen_text(app)
        await open_pane(app, pilot, "4")
        await pilot.press("enter")
        for _ in range(50):
            await pilot.pause(0.1)
            if app.screen.query("#bit-matrix"):
                break
        lines = screen_text(app).splitlines()
        header = next(line for line in lines if line.startswith("model"))
        assert "LPDI" in header and len(header.rstrip()) <= 80
        await pilot.press("escape")
        await pilot.press("s")
        await pilot.pause()
        field = app.screen.query_one("#sel-axes")
        field.value = "harness=lm-eval shots=5"
        await field.action_submit()
        await pilot.pause()
        from textual.widgets import SelectionList

        chosen = app.screen.query_one("#sel-configs", SelectionList).selected
        assert sorted(chosen) == ["lm-eval:arc_easy:acc+k5", "lm-eval:arc_easy:acc_norm+k5"]
        field.value = "harness=nothing"
        await field.action_submit()
        await pilot.pause()
        assert "no config has harness=nothing" in screen_text(app)
