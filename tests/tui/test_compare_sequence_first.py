"""No seed shopping in the app (issue 58 part 2) and `v`'s settings (issue 60): the sequence
view records a replay as the pair's first comparison as `compare` does (the same record the
CLI reads back), shows the line "That verdict stands; this one is not independent evidence"
under a comparison that is not the first, reads a live comparison's record without writing
it, and replays a pair with the chunk (seed, margin) of its recorded comparison, else of the
comparison the Compare form started."""

from __future__ import annotations

import json

import pytest

from fragility_tui.store.store import Store
from fragility_tui.tui.sequence import (SequencePlan, SequenceSettings, SequenceState,
                                        first_comparison_line, replay_settings)

from helpers import run_cli

from .test_compare_sequence import (_compare_pane, _fake_runs, _wait_text,
                                    synthetic_store_app)

pytestmark = pytest.mark.anyio
GRID = "synthetic-small"
LINE = "That verdict stands; this one is not independent evidence."


def _cli_compare(store, *args) -> dict:
    proc = run_cli("compare", *args, "--grid", GRID, "--json", db=store.path, check=True)
    return json.loads(proc.stdout)


# ---------------------------------------------------------------- without the app
def _record(reference, seed, chunk=25, margin=0.02, scope="population"):
    return {"reference": reference, "seed": seed, "chunk": chunk, "margin": margin,
            "scope": scope}


def test_v_replays_the_recorded_comparison_else_the_forms_else_the_defaults():
    form = SequenceSettings(margin=3.5, seed=7, chunk=5, reference="cloze_qa", max_items=9)
    records = [_record("cloze_qa", 3, chunk=10, margin=0.035), _record("o0.letter", 4, 12)]
    # the pair's comparison at the view's reference, with its seed, chunk and margin
    assert replay_settings(records, "o0.letter", form) == SequenceSettings(seed=4, chunk=12)
    # none at this reference: the pair's first one's (the reference stays the view's)
    assert replay_settings(records, "o1.letter", form) == SequenceSettings(
        margin=3.5, seed=3, chunk=10)
    # nothing recorded: the form's chunk, margin and seed (not its reference or budgets)
    assert replay_settings([], "o0.letter", form) == SequenceSettings(margin=3.5, seed=7,
                                                                      chunk=5)
    assert replay_settings([], "o0.letter", None) == SequenceSettings()


def test_the_line_names_the_first_verdict_as_a_or_b_and_fits_two_lines():
    state = SequenceState("model-b", "model-a", False, SequenceSettings(seed=3))
    assert first_comparison_line(state) is None  # not read yet: nothing to say
    state.first = {"reference": "cloze_qa", "seed": 0, "created_at": "2025-06-01T10:00:00",
                   "result": {"winner": "model-a", "settled": "winner", "stop": "winner",
                              "items_used": 100, "pool": 265, "margin_points": 2.0}}
    assert first_comparison_line(state) is None  # the first comparison itself
    state.independent = False
    line = first_comparison_line(state)
    assert line == ("first comparison (ref cloze_qa, seed 0): winner B after 100 of 265 items. "
                    + LINE)
    state.first["result"].update(winner=None, settled=None, stop="pool-exhausted")
    line = first_comparison_line(state)
    assert line == ("first comparison (ref cloze_qa, seed 0): not settled (pool exhausted) "
                    f"after 100 of 265 items. {LINE}")
    assert len(line) <= 2 * 77  # two lines at 80 columns (the pane's padding and scrollbar)


# ---------------------------------------------------------------- in the app, at 80×24
async def test_v_records_the_first_comparison_as_the_cli_does(synthetic_store):
    """`v` at the defaults records the pair's first comparison; the CLI's replay with
    another seed then reads it back and says the app's verdict stands."""
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await _compare_pane(app, pilot)
        a, b = pane._picked_pair()
        await pilot.press("v")
        text = await _wait_text(app, pilot, "verdict:")
        assert "seed 0 · chunk 25" in text and LINE not in text  # the first: no line
        rows = Store(synthetic_store.path).comparisons(GRID, a, b, "observed")
        assert [(r["reference"], r["seed"], r["chunk"], r["live"]) for r in rows] == [
            ("o0.letter", 0, 25, False)]
        shown = pane.query_one("#compare-table").row_count
        assert rows[0]["result"]["items_used"] == min(40, 25 * shown)
    out = _cli_compare(synthetic_store, a, b, "--seed", "3")
    assert out["independent_evidence"] is False
    assert (out["first_comparison"]["seed"], out["first_comparison"]["live"]) == (0, False)


async def test_a_comparison_after_the_first_shows_that_the_first_verdict_stands(
        synthetic_store, tmp_path):
    """The CLI compared the pair first at cloze_qa; `v` at the view's reference (o0.letter)
    replays it with that comparison's seed and chunk and says the first one stands."""
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await _compare_pane(app, pilot)
        a, b = pane._picked_pair()
        first = _cli_compare(synthetic_store, a, b, "--reference", "cloze_qa", "--seed", "3",
                             "--chunk", "10")
        assert first["independent_evidence"] is True
        await pilot.press("v")
        text = await _wait_text(app, pilot, "not independent evidence")
        assert "ref o0.letter · margin ±2 · seed 3 · chunk 10" in text
        assert "first comparison (ref cloze_qa, seed 3): " in text and LINE in text
        shown = str(pane.query_one("#compare-result").render()).splitlines()
        line = shown[2]  # right under the verdict
        assert shown[1].startswith("verdict:") and line.startswith(
            "first comparison (ref cloze_qa, seed 3): ") and line.endswith(LINE)
        winner = first["first_comparison"]["result"]["winner"]
        verdict = (f"winner {'A' if winner == a else 'B'}" if winner else "not settled" if
                   not first["settled"] else "equivalent within ±2 points")
        assert f"): {verdict}" in line
        app.save_screenshot(str(tmp_path / "first-comparison-80x24.svg"))
        # the app's replay is recorded too, at its own reference, behind the CLI's
        rows = Store(synthetic_store.path).comparisons(GRID, a, b, "observed")
        assert [(r["reference"], r["seed"], r["chunk"]) for r in rows] == [
            ("cloze_qa", 3, 10), ("o0.letter", 3, 10)]
        await pilot.press("v")  # back to the decision: the line goes with the sequence
        text = await _wait_text(app, pilot, "robust set:")
        assert "not independent evidence" not in text


async def test_a_followed_live_comparison_reads_the_record_without_writing_it(
        synthetic_store):
    """A comparison the form started with seed 5 after the pair's first one at seed 0: its
    `compare` process records itself; the pane only reads the record and says the seed-0
    verdict stands."""
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await _compare_pane(app, pilot)
        a, b = pane._picked_pair()
        _cli_compare(synthetic_store, a, b)
        cube = app.view.full
        plan = SequencePlan(GRID, a, b, ("compare",), SequenceSettings(seed=5, chunk=10))
        runs = _fake_runs(plan)
        app.gateway.runs = lambda: runs
        pane._pool = lambda _runs: (list(cube.items), list(cube.benchmarks))
        pane.follow(plan)
        pane.compare()
        text = await _wait_text(app, pilot, "not independent evidence")
        assert "live comparison · ref o0.letter · margin ±2 · seed 5 · chunk 10" in text
        assert "first comparison (ref o0.letter, seed 0): " in text
        rows = Store(synthetic_store.path).comparisons(GRID, a, b, "observed")
        assert [(r["seed"], r["live"]) for r in rows] == [(0, False)]  # nothing written


async def test_v_uses_the_forms_chunk_for_a_pair_not_yet_compared(synthetic_store):
    """Issue 60: the form's comparison ran in chunks of 10; `v` on another pair of its grid
    replays in chunks of 10 too, not compare's 25 (40 items: four points, not two)."""
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await _compare_pane(app, pilot)
        a, b = pane._picked_pair()
        others = [m for m in app.view.cube.models if m not in (a, b)]
        plan = SequencePlan(GRID, others[0], others[1], ("compare",),
                            SequenceSettings(chunk=10, seed=2, margin=3.0))
        pane.following = plan  # the form's comparison, of another pair
        await pilot.press("v")
        text = await _wait_text(app, pilot, "verdict:")
        assert "replay of the grid's cells · ref o0.letter · margin ±3 · seed 2 · chunk 10" \
            in text
        rows = Store(synthetic_store.path).comparisons(GRID, a, b, "observed")
        assert [(r["seed"], r["chunk"], r["margin"]) for r in rows] == [(2, 10, 0.03)]
        used = rows[0]["result"]["items_used"]
        assert pane.query_one("#compare-table").row_count == -(-used // 10)
