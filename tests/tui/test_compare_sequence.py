"""Stop when settled (issue 45) in the app: the Compare form's option starts one
`fragility-tui compare A B --items ...` process (its start recorded, not run), bad settings
name their field, and the Compare pane shows the sequence: a replay over the grid's cells
(`v`), and a live comparison as its stored cells arrive (tui/sequence.live_state)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from textual.widgets import Checkbox, Input, Select

from fragility_tui.analysis.sequential import item_order, run_sequential
from fragility_tui.tui.panes.compare_form import CompareFormScreen
from fragility_tui.tui.panes.compare_sequence import SequenceReady
from fragility_tui.tui.panes.run_form import check_sequential_form
from fragility_tui.tui.sequence import (RUNNING, STOPPED, SequencePlan, SequenceSettings,
                                        live_state, replay_state, verdict_line)

from .conftest import open_pane, screen_text, wait_workers
from .test_compare_form import model_folder, open_compare_form

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------- the form's checks
def test_stop_when_settled_is_one_compare_process_the_cli_accepts(tmp_path):
    model_folder(tmp_path, "ckpt-a")
    (tmp_path / "items.jsonl").write_text("{}\n")
    form = {"model_a": "ckpt-a", "b_build": "int4", "items": "items.jsonl", "grid": "g",
            "per_benchmark": "40", "configs": "o0.letter,cloze_qa", "device": "cpu",
            "margin": "3.5", "reference": "cloze_qa", "seed": "7", "max_items": "100",
            "max_seconds": "600", "max_tokens": "50000"}
    plan, problems = check_sequential_form(form, tmp_path, "/s/store.duckdb")
    assert problems == [] and (plan.grid, plan.a, plan.b) == ("g", "ckpt-a", "ckpt-a+int4")
    spec = str(tmp_path / "ckpt-a")
    assert list(plan.argv) == [
        "compare", spec, spec + "+int4", "--display", "none",
        "--items", str(tmp_path / "items.jsonl"), "--grid", "g", "--per-benchmark", "40",
        "--configs", "o0.letter,cloze_qa", "--device", "cpu", "--margin", "3.5",
        "--seed", "7", "--reference", "cloze_qa", "--max-items", "100",
        "--max-seconds", "600", "--max-tokens", "50000", "--db", "/s/store.duckdb"]
    from fragility_tui.cli import build_parser  # the CLI parses it, with the same values

    args = build_parser().parse_args(list(plan.argv))
    assert (args.a, args.b, args.items, args.grid, args.margin, args.reference, args.seed,
            args.max_items, args.max_seconds, args.max_tokens, args.per_benchmark) == (
        spec, spec + "+int4", [str(tmp_path / "items.jsonl")], "g", 3.5, "cloze_qa", 7, 100,
        600.0, 50000, 40)
    assert plan.settings == SequenceSettings(margin=3.5, reference="cloze_qa", seed=7,
                                             max_items=100, max_seconds=600.0,
                                             max_tokens=50000)


def test_empty_settings_are_the_clis_defaults_and_the_starter_items(tmp_path):
    plan, problems = check_sequential_form({"model_a": "smollm2-135m-instruct",
                                            "model_b": "gemma3-270m", "grid": "g"},
                                           tmp_path, None)
    assert problems == []
    argv = list(plan.argv)
    assert argv[argv.index("--items") + 1].endswith("sample_grids/starter_items.jsonl")
    assert argv[argv.index("--margin") + 1] == "2" and argv[argv.index("--seed") + 1] == "0"
    for flag in ("--reference", "--max-items", "--max-seconds", "--max-tokens", "--db"):
        assert flag not in argv


@pytest.mark.parametrize("fields, expected", [
    ({"margin": "-1"}, "margin: must be at least 0, got -1"),
    ({"margin": "two"}, "margin: 'two' is not a number"),
    ({"seed": "1.5"}, "seed: '1.5' is not a whole number"),
    ({"max_items": "0"}, "max items: must be at least 1, got 0"),
    ({"max_seconds": "0"}, "max seconds: must be above 0, got 0"),
    ({"max_seconds": "nan"}, "max seconds: 'nan' is not a number"),
    ({"max_tokens": "lots"}, "max tokens: 'lots' is not a whole number"),
    ({"reference": "o9.letter"}, "reference: unknown config 'o9.letter'"),
    ({"reference": "o0.letter", "configs": "cloze_qa"},
     "reference: o0.letter is not among the configs (cloze_qa)"),
])
def test_bad_sequence_settings_name_the_field(tmp_path, fields, expected):
    form = {"model_a": "smollm2-135m-instruct", "b_build": "int8", "grid": "g", **fields}
    plan, problems = check_sequential_form(form, tmp_path, None)
    assert plan is None and any(p.startswith(expected) for p in problems), problems


# ---------------------------------------------------------------- the sequence's states
def _fake_runs(plan, seconds=10.0, tokens=500, n=2):
    spec = {"items": ["x.jsonl"], "per_benchmark": None, "seed": 0,
            "configs": ["o0.letter", "cloze_qa"], "compare": {"pair": [plan.a, plan.b]}}
    return [SimpleNamespace(grid=plan.grid, spec=spec, seconds=seconds, tokens=tokens)
            for _ in range(n)]


def _cut(cube, a, b, keep_uids):
    """The cube as a live comparison leaves it: the pair's cells for `keep_uids` only."""
    present = cube.present.copy()
    drop = np.array([u not in keep_uids for u in cube.items])
    for m in (cube.models.index(a), cube.models.index(b)):
        present[m][drop] = False
    return dataclasses.replace(cube, present=present)


def test_live_state_follows_the_stored_chunks_and_reads_the_stop(synthetic_store):
    cube = synthetic_store.load_cube("synthetic-small")
    a, b = cube.models[1], cube.models[2]  # a pair that runs the pool out
    settings = SequenceSettings(chunk=10, max_seconds=30.0)
    plan = SequencePlan("synthetic-small", a, b, ("compare",), settings)
    pool = (list(cube.items), list(cube.benchmarks))
    order = item_order(cube.benchmarks, cube.items, 0, False)
    done = {cube.items[k] for k in order[:25]}  # two whole chunks and half of the third
    cut = _cut(cube, a, b, done)
    running = live_state(cut, plan, _fake_runs(plan), pool, None)
    assert running.status == RUNNING and running.stop is None
    assert [s.items for s in running.result.path] == [10, 20]
    assert "running, open after 20 of 40 items" in verdict_line(running)
    assert "chunk 3 being evaluated" in verdict_line(running)
    # the same path as the CLI's replay over the same cells
    full = replay_state(cube, a, b, settings)
    assert running.result.path == full.result.path[:2]
    # the process ended between chunks having spent its seconds: the budget stopped it
    spent = live_state(cut, plan, _fake_runs(plan, seconds=20.0), pool, 0)
    assert spent.stop == "budget" and spent.result.budget == "max-seconds"
    # no verdict: the items used, never a share "saved" (compare's words, issue 58)
    assert verdict_line(spent) == ("verdict: not settled (budget: max-seconds spent); 20 of "
                                   "40 items used")
    failed = live_state(cut, plan, _fake_runs(plan), pool, 1)
    assert failed.status == STOPPED and "exit status 1" in verdict_line(failed)
    starting = live_state(None, plan, [], None, None)
    assert starting.result is None and "preparing both models" in verdict_line(starting)


# ---------------------------------------------------------------- in the app, at 80×24
async def test_the_form_starts_one_compare_process_and_follows_it(synthetic_store, tmp_path):
    a = model_folder(tmp_path, "ckpt-a")
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_compare_form(app, pilot)
        launched = []
        app.pane("runs").launch = lambda argv, what: launched.append((argv, what))
        assert form.query_one("#cf-margin", Input).disabled  # until "stop when settled"
        for field, value in (("model-a", str(a)), ("grid", "settle"), ("configs", "o0.letter")):
            form.query_one(f"#cf-{field}", Input).value = value
        form.query_one("#cf-b-build", Select).value = "int4"
        form.query_one("#cf-device", Select).value = "cpu"
        form.query_one("#cf-settled", Checkbox).value = True
        await pilot.pause()
        assert not form.query_one("#cf-margin", Input).disabled
        assert "Stop when settled" in screen_text(app) and "max tokens" in screen_text(app)
        form.query_one("#cf-margin", Input).value = "-2"  # a bad field first
        await pilot.pause()
        await pilot.click("#cf-start")
        await pilot.pause()
        assert str(form.query_one("#cf-error").render()).startswith("margin: must be at least 0")
        assert "margin: must be at least 0" in screen_text(app) and launched == []
        for field, value in (("margin", "3"), ("seed", "5"), ("max-items", "30"),
                             ("max-seconds", "900")):
            form.query_one(f"#cf-{field}", Input).value = value
        await pilot.pause()
        # Enter in a field starts, as Start does. Not a second click: Textual's Button ignores
        # a click while its 0.2 s press effect (class -active) from the first one lasts.
        form.query_one("#cf-margin", Input).focus()
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, CompareFormScreen), str(
            form.query_one("#cf-error").render())
        assert len(launched) == 1, launched  # one process, not two runs
        argv, what = launched[0]
        assert argv[:3] == ["compare", str(a), str(a) + "+int4"] and "stop when settled" in what
        for flag, value in (("--grid", "settle"), ("--margin", "3"), ("--seed", "5"),
                            ("--max-items", "30"), ("--max-seconds", "900"),
                            ("--device", "cpu"), ("--configs", "o0.letter"),
                            ("--db", str(synthetic_store.path))):
            assert argv[argv.index(flag) + 1] == value, flag
        pane = app.pane("compare")
        assert pane.sequence_on and pane.following.a == "ckpt-a" and \
            pane.following.b == "ckpt-a+int4" and pane.following.settings.max_items == 30
        text = " ".join(screen_text(app).split())
        assert "Stop when settled: waiting for the first chunk's cells of ckpt-a and " \
               "ckpt-a+int4 in grid settle" in text
        assert app.compare_runs.awaited == "settle"


def synthetic_store_app(store):
    from fragility_tui.tui.app import FragilityApp

    return FragilityApp(str(store.path))


async def _compare_pane(app, pilot):
    pane = await open_pane(app, pilot, "8")
    pane.focus_main()
    await wait_workers(app)
    await pilot.pause()
    return pane


async def _wait_text(app, pilot, needle: str) -> str:
    for _ in range(200):
        await pilot.pause(0.05)
        text = " ".join(screen_text(app).split())
        if needle in text:
            return text
    raise AssertionError(f"{needle!r} not on screen: {screen_text(app)}")


async def test_v_replays_the_pairs_sequence_over_the_grids_cells(synthetic_store, tmp_path):
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await _compare_pane(app, pilot)
        a, b = pane._picked_pair()
        await pilot.press("v")
        text = await _wait_text(app, pilot, "verdict:")
        cube = app.view.cube
        expected = run_sequential(
            cube.bits[cube.models.index(a)].astype(np.int8)
            - cube.bits[cube.models.index(b)].astype(np.int8), cube.benchmarks, cube.items,
            cube.configs, cube.reference, chunk=25, margin=0.02)
        # a replay spent nothing: the items it used, never a share "saved" (as compare's
        # replay says it, issue 58), whether it settled or ran the pool out
        assert f"; {expected.items_used} of 40 items used" in text and "saved" not in text
        assert "replay of the grid's cells · ref o0.letter · margin ±2 · seed 0 · chunk 25" \
            in text
        # 80×24: the path table first (a row per chunk), g swaps in the plot
        table = pane.query_one("#compare-table")
        assert table.display and table.row_count == len(expected.path)
        assert f"{expected.path[0].items}" in text and "reading" in text
        await pilot.press("g")
        await pilot.pause(0.3)
        plot = pane.query_one("#compare-plot")
        assert plot.display and plot.border_title.startswith("● Δ̂ (A − B)  │ sequence")
        shown = screen_text(app)
        assert "items done" in shown and "│" in shown
        app.save_screenshot(str(tmp_path / "sequence-80x24.svg"))
        await pilot.press("v")  # back to the full grid's decision (its Δ̂ per config)
        await _wait_text(app, pilot, "Δ̂ (A − B) per config")
        assert not pane.sequence_on
        assert "robust set" in str(pane.query_one("#compare-result").render())


async def test_a_recorded_live_sequence_is_drawn_with_its_verdict(synthetic_store, tmp_path):
    """A live comparison's state (as live_state reads it from the stored cells) fed to the
    pane: the verdict line, the plot with the stop and the path at 120×40."""
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await _compare_pane(app, pilot)
        a, b = pane._picked_pair()
        cube = app.view.full
        plan = SequencePlan("synthetic-small", a, b, ("compare",),
                            SequenceSettings(chunk=10, margin=100.0))
        pane.following, pane.sequence_on = plan, True
        state = live_state(cube, plan, _fake_runs(plan, seconds=12.5, tokens=2048),
                           (list(cube.items), list(cube.benchmarks)), None)
        assert state.stop == "equivalent"  # a margin of 100 points settles the first chunk
        pane.post_message(SequenceReady(app.view, a, b, state))
        text = await _wait_text(app, pilot, "verdict: equivalent within ±100 points")
        assert "(settled); 10 of 40 items used, 75% of the pool saved" in text
        assert "2 runs, 25 s, 4,096 tokens" in text and "live comparison · " in text
        plot = pane.query_one("#compare-plot")
        assert plot.display and "┊" in screen_text(app)  # the stopping point
        app.save_screenshot(str(tmp_path / "sequence-120x40.svg"))


@pytest.mark.parametrize("case", ["settled replay", "live budget stop"])
async def test_the_pane_says_saved_only_for_a_settled_live_verdict(synthetic_store, case):
    """Issue 58, as `compare` prints it: a replay that settles spent nothing, and a live
    comparison its budget stopped has no verdict: each says the items used, never "N% of
    the pool saved" (which the pane said for both)."""
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await _compare_pane(app, pilot)
        a, b = pane._picked_pair()
        cube = app.view.full
        if case == "settled replay":  # a margin of 100 points settles the first chunk
            state = replay_state(cube, a, b, SequenceSettings(chunk=10, margin=100.0))
            expected = "verdict: equivalent within ±100 points (settled); 10 of 40 items used"
        else:  # two whole chunks stored, then the process ended having spent its seconds
            plan = SequencePlan("synthetic-small", a, b, ("compare",),
                                SequenceSettings(chunk=10, max_seconds=30.0))
            order = item_order(cube.benchmarks, cube.items, 0, False)
            cut = _cut(cube, a, b, {cube.items[k] for k in order[:25]})
            state = live_state(cut, plan, _fake_runs(plan, seconds=20.0),
                               (list(cube.items), list(cube.benchmarks)), 0)
            expected = "verdict: not settled (budget: max-seconds spent); 20 of 40 items used"
        pane.following, pane.sequence_on = None, True
        pane.post_message(SequenceReady(app.view, a, b, state))
        text = await _wait_text(app, pilot, "verdict:")
        assert expected in text and "saved" not in text, text


async def test_a_followed_grid_without_both_models_yet_waits_instead_of_replaying(
        synthetic_store, tmp_path):
    """Seen in CI: the form's comparison had written model A's first cells only, the pickers
    still held another pair, and the pane showed a replay verdict of that pair ("not settled
    after 0 of 25 items"). Until both followed models are in the grid it says it waits."""
    app = synthetic_store_app(synthetic_store)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await _compare_pane(app, pilot)
        plan = SequencePlan("synthetic-small", "tiny-a", "tiny-b", ("compare",),
                            SequenceSettings(chunk=10, margin=100.0))
        pane.follow(plan)
        pane.compare()
        text = await _wait_text(app, pilot, "waiting for both models' first cells")
        assert "verdict:" not in text and "tiny-a and tiny-b" in text


def test_the_app_replays_a_pair_over_its_own_configs_as_the_cli_does(tmp_path):
    """A third model run under a config the pair lacks (another harness's import) does not
    hold the pair back in the app either: `v` replays over the configs A and B have, as
    `compare A B --grid` does, to the same path and verdict."""
    import json

    from fragility_tui.store.importer import import_long_grid
    from fragility_tui.store.store import Store
    from helpers import run_cli

    rng = np.random.default_rng(5)
    rows = ["model,item,config,correct"]
    for model, configs, p in (("a", ("o0.letter", "cloze_qa"), 0.8),
                              ("b", ("o0.letter", "cloze_qa"), 0.4),
                              ("c", ("o0.letter", "o1.letter", "cloze_qa"), 0.5)):
        rows += [f"{model},q{i},{c},{int(rng.random() < p)}" for i in range(60) for c in configs]
    (tmp_path / "g.csv").write_text("\n".join(rows) + "\n")
    store = Store(tmp_path / "s.duckdb")
    import_long_grid(store, tmp_path / "g.csv", "g")
    cube = store.load_cube("g")
    assert "o1.letter" in cube.configs
    settings = SequenceSettings(chunk=10, margin=5.0, reference="cloze_qa")
    state = replay_state(cube, "a", "b", settings)
    cli = json.loads(run_cli("compare", "a", "b", "--grid", "g", "--chunk", "10", "--margin",
                             "5", "--reference", "cloze_qa", "--json", db=store.path,
                             check=True).stdout)
    assert state.result.stop == cli["stop"] != "awaiting-cells"
    assert [(s.items, s.delta) for s in state.result.path] == \
        [(s["items"], s["delta"]) for s in cli["path"]]
