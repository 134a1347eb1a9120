"""Two models' real lm-eval logs of one task, imported, compared item by item: the CLI's
`compare` and `report --pair` on the imported config, and the app's Compare pane and item
drill-down (the log's own prompt) at 80×24."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import REPO, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs" / "lmeval"
CONFIG = "lm-eval:fragility_starter:acc_norm+k0"


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    db = tmp_path_factory.mktemp("two") / "s.duckdb"
    run_cli("import-log", str(LOGS / "mc"), str(LOGS / "mc_gemma"), "--grid", "two",
            "--items", str(REPO / "sample_grids" / "starter_items.jsonl"), db=db, check=True)
    return db


def test_compare_replays_on_an_imported_config(two_models):
    out = json.loads(run_cli("compare", "smollm2-hf", "gemma-hf", "--grid", "two",
                             "--reference", CONFIG, "--json", db=two_models,
                             check=True).stdout)
    assert out["reference"] == CONFIG and out["pool"] == 40
    report = json.loads(run_cli("report", "--grid", "two", "--json", "--boot", "200",
                                "--random-draws", "10", "--reference", CONFIG,
                                "--pair", "smollm2-hf,gemma-hf", db=two_models,
                                check=True).stdout)
    (detail,) = report["pair_details"]
    at = {c["config"]: c for c in detail["configs"]}
    # lm-eval's own acc_norm: 0.475 (SmolLM2) and 0.425 (Gemma), reproduced per config
    assert at[CONFIG]["accuracy_a"] == pytest.approx(0.475)
    assert at[CONFIG]["accuracy_b"] == pytest.approx(0.425)
    decision = next(d for d in report["decisions"] if d["config"] == CONFIG)
    assert decision["label"] in ("underpowered", "harness-sensitive")  # 40 items: no winner


@pytest.mark.anyio
async def test_the_app_compares_the_imported_runs_at_80x24(two_models, tmp_path):
    from fragility_tui.tui.app import FragilityApp

    from tests.tui.conftest import open_pane, screen_text, wait_ready

    db = tmp_path / "s.duckdb"
    shutil.copy(two_models, db)
    app = FragilityApp(str(db))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        assert app.view.report.grid.reference == "lm-eval:fragility_starter:acc+k0"
        await open_pane(app, pilot, "8")
        result = str(app.query_one("#compare-result").render())
        assert "McNemar" in result and "observed" in result
        assert {app.query_one(f"#compare-{x}").value for x in "ab"} == {"smollm2-hf",
                                                                        "gemma-hf"}
        await open_pane(app, pilot, "4")
        await pilot.press("enter")
        detail = ""
        for _ in range(100):  # the item's cells load on a worker
            await pilot.pause(0.1)
            if app.screen.query("#cell-detail"):
                detail = str(app.screen.query_one("#cell-detail").render())
                if "prompt (as the log shows it)" in detail:
                    break
        assert "imported from another harness's log" in detail
        assert "Question: " in detail and "Answer:" in detail  # lm-eval's own context
        assert "error" not in screen_text(app).lower()
