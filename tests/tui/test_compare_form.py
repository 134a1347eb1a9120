"""Compare in one go (issue 22, item 4) and the run form's backend (issue 23): the forms'
checks and the `fragility-tui run` arguments they build, and the Compare form in the app at
80×24 (its runs' starts recorded, not run: test_compare_form_runs.py runs them for real)."""

from __future__ import annotations

import json
from functools import partial

import pytest
from textual.widgets import Input, Select

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.panes.compare_form import CompareFormScreen
from fragility_tui.tui.panes.run_form import (check_compare_form, check_run_form,
                                              grid_model_name, run_argv)

from .conftest import open_pane, screen_text, walk_checks

pytestmark = pytest.mark.anyio


def model_folder(parent, name: str):
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return folder


def test_two_model_folders_make_two_runs_into_one_grid(tmp_path):
    model_folder(tmp_path, "ckpt-a"), model_folder(tmp_path, "ckpt-b")
    (tmp_path / "items.jsonl").write_text("{}\n")
    plan, problems = check_compare_form(
        {"model_a": "ckpt-a", "model_b": "ckpt-b", "items": "items.jsonl", "grid": "mine",
         "per_benchmark": "20", "configs": "o0.letter,cloze_qa", "device": "cuda:1"},
        tmp_path, "/s/store.duckdb")
    assert problems == []
    assert (plan.grid, plan.a, plan.b) == ("mine", "ckpt-a", "ckpt-b")
    tail = ["--display", "none", "--items", str(tmp_path / "items.jsonl"), "--grid", "mine",
            "--per-benchmark", "20", "--configs", "o0.letter,cloze_qa", "--device", "cuda:1",
            "--db", "/s/store.duckdb"]
    assert list(plan.argv_a) == ["run", "--model", str(tmp_path / "ckpt-a"), *tail]
    assert list(plan.argv_b) == ["run", "--model", str(tmp_path / "ckpt-b"), *tail]


def test_a_models_quantised_build_is_the_same_model_with_quantize(tmp_path):
    model_folder(tmp_path, "ckpt-a")
    plan, problems = check_compare_form({"model_a": "ckpt-a", "model_b": "ignored",
                                         "b_build": "int4", "grid": "g"}, tmp_path, None)
    assert problems == [] and (plan.a, plan.b) == ("ckpt-a", "ckpt-a+int4")
    assert plan.argv_b[plan.argv_b.index("--quantize") + 1] == "int4"
    assert "--quantize" not in plan.argv_a
    assert plan.argv_b[plan.argv_b.index("--model") + 1] == str(tmp_path / "ckpt-a")


@pytest.mark.parametrize("form, expected", [
    ({"model_a": "no-such-folder/", "model_b": "smollm2-135m-instruct", "grid": "g"},
     "model A: 'no-such-folder/' is not an alias"),
    ({"model_a": "smollm2-135m-instruct", "model_b": "./ckpts/run-3", "grid": "g"},
     "model B: './ckpts/run-3' is not an alias"),
    ({"model_a": "smollm2-135m-instruct", "model_b": "gemma3-270m", "grid": "g",
      "items": "missing.jsonl"}, "items: no such file or folder"),
    ({"model_a": "smollm2-135m-instruct", "model_b": "smollm2-135m-instruct", "grid": "g"},
     "model B: the same model as A: choose A's int8 or int4 build"),
    ({"model_a": "smollm2-135m-instruct", "grid": "g"}, "fill in model B, or choose A's"),
    ({"model_a": "", "model_b": "gemma3-270m", "grid": "g"}, "fill in model A"),
    ({"model_a": "smollm2-135m-instruct", "model_b": "gemma3-270m", "grid": ""},
     "fill in the grid"),
    ({"model_a": "smollm2-135m-instruct", "model_b": "gemma3-270m", "grid": "g",
      "configs": "o9.letter"}, "configs: unknown config 'o9.letter'"),
])
def test_bad_compare_forms_name_the_field(tmp_path, form, expected):
    plan, problems = check_compare_form(form, tmp_path, None)
    assert plan is None and any(p.startswith(expected) for p in problems), problems


def test_two_folders_with_one_name_would_share_a_model_name(tmp_path):
    a, b = model_folder(tmp_path / "x", "ckpt"), model_folder(tmp_path / "y", "ckpt")
    plan, problems = check_compare_form({"model_a": str(a), "model_b": str(b), "grid": "g"},
                                        tmp_path, None)
    assert plan is None and problems[0].startswith("model B: would be recorded as 'ckpt'")


def test_model_names_agree_with_the_runner(tmp_path):
    """The pair Compare opens on is the name the run records (runners/models.resolve_spec +
    prepare's +int4): a folder by its name, a .gguf by its stem, a hub id without @rev."""
    models = pytest.importorskip("runners.models.load")
    folder = model_folder(tmp_path, "my-ckpt")
    gguf = tmp_path / "tiny.Q4_0.gguf"
    gguf.write_bytes(b"GGUF")
    for spec in (str(folder), str(gguf)):
        assert grid_model_name(spec) == models.resolve_spec(spec).name
    assert grid_model_name(str(folder), "int8") == "my-ckpt+int8"
    assert grid_model_name("org/name@abc123") == "org/name"
    assert grid_model_name("smollm2-135m-instruct", "int4") == "smollm2-135m-instruct+int4"


def test_the_openai_backend_passes_the_clis_flags(tmp_path):
    form = {"model": "", "grid": "served", "backend": "openai",
            "base_url": "http://127.0.0.1:8000/v1", "served_model": "smollm2",
            "api_key_env": "MY_KEY", "endpoint": "chat"}
    form, problems = check_run_form(form, tmp_path)
    assert problems == []
    assert run_argv(form, None) == [
        "run", "--display", "none", "--grid", "served", "--backend", "openai",
        "--base-url", "http://127.0.0.1:8000/v1", "--served-model", "smollm2",
        "--api-key-env", "MY_KEY", "--endpoint", "chat"]
    # what commands/run.py accepts: the argv parses, with the same values
    from fragility_tui.cli import build_parser

    args = build_parser().parse_args(run_argv(form, None))
    assert (args.backend, args.base_url, args.served_model, args.api_key_env,
            args.endpoint) == ("openai", "http://127.0.0.1:8000/v1", "smollm2", "MY_KEY",
                               "chat")
    assert run_argv({"model": "m", "grid": "g", "backend": "vllm"}, None)[-2:] == [
        "--backend", "vllm"]


def test_bad_served_fields_name_the_field(tmp_path):
    _, problems = check_run_form({"grid": "g", "backend": "openai", "base_url": "localhost:8000",
                                  "served_model": "", "api_key_env": "sk-abc123",
                                  "quantize": "int4"}, tmp_path)
    assert any(p.startswith("base URL: 'localhost:8000' does not start with http")
               for p in problems)
    assert any(p.startswith("fill in the served model") for p in problems)
    assert any(p.startswith("API key variable: the name of an environment variable")
               for p in problems)
    assert not any("sk-abc123" in p for p in problems)  # a key typed by mistake is not echoed
    assert any(p.startswith("quantise:") for p in problems)


# ---------------------------------------------------------------- in the app, at 80×24
async def open_compare_form(app, pilot):
    await open_pane(app, pilot, "8")
    app.pane("compare").focus_main()
    await pilot.press("n")
    for _ in range(100):
        await pilot.pause(0.05)
        if isinstance(app.screen, CompareFormScreen):
            return app.screen
    raise AssertionError("the Compare form did not open")


async def test_one_app_walks_the_compare_and_run_forms(synthetic_store, tmp_path):
    """The form checks of this file that start nothing, on one app at 80×24 (issue 60: each
    started its own). In this order because each leaves the app as the next expects: every
    form is left with Esc or its Start; the one that starts both runs (recorded) and leaves
    the app waiting for their grid comes last."""
    a, b = model_folder(tmp_path, "ckpt-a"), model_folder(tmp_path, "ckpt-b")
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await walk_checks(
            app, pilot, check_app_letters_do_not_act_behind_the_compare_form,
            partial(check_a_bad_compare_form_says_which_field, tmp_path=tmp_path),
            check_the_palette_opens_the_compare_form,
            check_a_fixed_run_form_field_clears_its_error,
            partial(check_the_run_form_offers_the_openai_backend, db=synthetic_store.path),
            partial(check_the_compare_form_starts_both_runs_and_waits_for_the_pair, a=a, b=b,
                    db=synthetic_store.path))


async def check_app_letters_do_not_act_behind_the_compare_form(app, pilot):
    """A modal screen's binding chain stops at itself (Textual 8), so a letter typed on the
    Start button or a menu never quits, exports or switches panes behind the form. One app,
    a form of its own for each field (opened afresh after the last one's Esc)."""
    for field in ("#cf-start", "#cf-b-build", "#cf-device"):
        form = await open_compare_form(app, pilot)
        form.query_one(field).focus()
        await pilot.pause()
        for key in ("s", "x", "c", "2", "n", "q"):
            await pilot.press(key)
            await pilot.pause()
            # no selection, export, pane switch, quit
            assert app.screen is form, (field, key)
        assert app.is_running
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not form, field


async def check_a_bad_compare_form_says_which_field(app, pilot, tmp_path):
    form = await open_compare_form(app, pilot)
    launched = []
    app.pane("runs").launch = lambda argv, what: launched.append(argv)
    form.query_one("#cf-model-a", Input).value = str(tmp_path / "no-such-model")
    form.query_one("#cf-model-b", Input).value = "smollm2-135m-instruct"
    form.query_one("#cf-grid", Input).value = "mine"
    await pilot.pause()
    form.query_one("#cf-model-a", Input).focus()
    await pilot.press("enter")
    await pilot.pause()
    error = str(form.query_one("#cf-error").render())
    assert error.startswith("model A:") and "no-such-model" in error
    assert "model A:" in screen_text(app)  # on screen at 80×24, not only in the widget
    assert isinstance(app.screen, CompareFormScreen) and launched == []
    form.query_one("#cf-model-a", Input).value = "gemma3-270m"
    await pilot.pause()  # fixed: its error goes at once, not at the next Start
    error = str(form.query_one("#cf-error").render())
    assert "model A:" not in error and error.startswith("fixed")
    form.query_one("#cf-grid", Input).value = "synthetic-small"  # the open grid
    await pilot.pause()
    await pilot.click("#cf-start")
    await pilot.pause()
    error = str(form.query_one("#cf-error").render())
    assert error.startswith("grid: synthetic-small is SYNTHETIC") and launched == []
    await pilot.press("escape")  # Esc leaves the form, nothing started
    await pilot.pause()
    assert not isinstance(app.screen, CompareFormScreen) and launched == []


async def check_the_palette_opens_the_compare_form(app, pilot):
    from fragility_tui.tui.palette import app_commands

    command = next(c for c in app_commands(app) if c.title.startswith("Compare in one go"))
    command.callback()
    for _ in range(100):
        await pilot.pause(0.05)
        if isinstance(app.screen, CompareFormScreen):
            break
    assert isinstance(app.screen, CompareFormScreen)
    await pilot.press("escape")  # leave the form for the next check
    await pilot.pause()
    assert not isinstance(app.screen, CompareFormScreen)


async def check_a_fixed_run_form_field_clears_its_error(app, pilot):
    """The run form's error went only at the next Start: `model: './ckpts/x' is not an
    alias…` stayed beside a model field that now held one."""
    pane = await open_pane(app, pilot, "7")
    launched = []
    pane.launch = lambda argv, what: launched.append(argv)
    model = pane.query_one("#run-model", Input)
    model.value = "./ckpts/x"
    pane.query_one("#run-start").press()
    await pilot.pause()
    assert "model: './ckpts/x' is not an alias" in screen_text(app) and launched == []
    model.value = "./ckpts/"  # still wrong: the error follows the field
    await pilot.pause()
    assert "model: './ckpts/' is not an alias" in screen_text(app)
    model.value = "smollm2-135m-instruct"
    await pilot.pause()
    text = screen_text(app)
    assert "is not an alias" not in text and "errors are fixed" in text and launched == []
    model.value = ""  # as the next check expects it
    await pilot.pause()


async def check_the_run_form_offers_the_openai_backend(app, pilot, db):
    pane = await open_pane(app, pilot, "7")
    launched = []
    pane.launch = lambda argv, what: launched.append(argv)
    assert not pane.query_one("#run-base-url").display  # only with openai
    pane.query_one("#run-backend", Select).value = "openai"
    await pilot.pause()
    assert pane.query_one("#run-base-url").display
    for field, value in (("grid", "served"), ("base-url", "http://10.0.0.2:8000/v1"),
                         ("served-model", "meta-llama/Llama-3.1-70B-Instruct"),
                         ("api-key-env", "OPENAI_API_KEY")):
        pane.query_one(f"#run-{field}", Input).value = value
    pane.query_one("#run-endpoint", Select).value = "chat"
    await pilot.pause()
    pane.query_one("#run-start").press()
    await pilot.pause()
    assert launched == [["run", "--display", "none", "--grid", "served", "--backend",
                         "openai", "--base-url", "http://10.0.0.2:8000/v1",
                         "--served-model", "meta-llama/Llama-3.1-70B-Instruct",
                         "--api-key-env", "OPENAI_API_KEY", "--endpoint", "chat",
                         "--db", str(db)]]
    text = screen_text(app)
    assert "base URL" in text and "key var" in text  # the fields fit at 80×24


async def check_the_compare_form_starts_both_runs_and_waits_for_the_pair(app, pilot, a, b,
                                                                        db):
    form = await open_compare_form(app, pilot)
    assert form.query_one("#cf-grid", Input).value == "my-grid"  # never a synthetic grid
    launched = []
    app.pane("runs").launch = lambda argv, what: launched.append(argv)
    for field, value in (("model-a", str(a)), ("model-b", str(b)), ("grid", "fresh"),
                         ("configs", "o0.letter")):
        form.query_one(f"#cf-{field}", Input).value = value
    form.query_one("#cf-device", Select).value = "cpu"
    await pilot.pause()
    await pilot.click("#cf-start")
    await pilot.pause()
    assert not isinstance(app.screen, CompareFormScreen)
    assert [argv[argv.index("--model") + 1] for argv in launched] == [str(a), str(b)]
    for argv in launched:
        assert argv[argv.index("--grid") + 1] == "fresh"
        assert argv[argv.index("--device") + 1] == "cpu"
        assert argv[argv.index("--db") + 1] == str(db)
    assert app.query_one("#panes").current == "compare"
    text = " ".join(screen_text(app).split())
    assert "waiting for the first cells of ckpt-a and ckpt-b in grid fresh" in text
    assert app.compare_runs.awaited == "fresh"  # looked for until the first run makes it


async def start_compare_form(app, pilot, a, b, grid: str) -> None:
    """The Compare form filled with two model folders, a grid and the CPU, then started."""
    form = await open_compare_form(app, pilot)
    for field, value in (("model-a", str(a)), ("model-b", str(b)), ("grid", grid)):
        form.query_one(f"#cf-{field}", Input).value = value
    form.query_one("#cf-device", Select).value = "cpu"
    await pilot.pause()
    await pilot.click("#cf-start")


async def test_a_compare_run_that_fails_to_start_is_reported_where_the_user_is(
        synthetic_store, tmp_path):
    """Folders with a config.json but no weights pass the form; the runs then fail at their
    start, and the Compare pane's user is told (a notification), and the pane stops waiting."""
    a, b = model_folder(tmp_path, "empty-a"), model_folder(tmp_path, "empty-b")
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await start_compare_form(app, pilot, a, b, grid="never")
        for _ in range(600):  # each process imports the runner before it fails
            await pilot.pause(0.1)
            failed = [n for n in app._notifications if n.title == "Run not started"]
            if len(failed) == 2:
                break
        assert sorted(n.message.split(" failed")[0] for n in failed) == [
            "start empty-a (compare A)", "start empty-b (compare B)"], failed
        assert app.query_one("#panes").current == "compare"
        result = app.pane("compare").query_one("#compare-result")
        for _ in range(50):  # the pane looks at its runs every 2 s: it stops waiting
            await pilot.pause(0.1)
            if "stopped" in str(result.render()):
                break
        assert str(result.render()).startswith("Compare in one go stopped: start empty-a")


async def test_a_run_that_cannot_be_launched_stops_the_wait_at_once(
        synthetic_store, tmp_path, monkeypatch):
    """The process cannot even be started (an OSError: no memory to fork, too many open
    files): the Compare pane says so at once instead of waiting for a grid nothing will make,
    and the app stops looking for it."""
    a, b = model_folder(tmp_path, "ckpt-a"), model_folder(tmp_path, "ckpt-b")

    def cannot_launch(argv, log_path):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr("fragility_tui.tui.panes.runs.launch_detached", cannot_launch)
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(100, 30)) as pilot:
        await start_compare_form(app, pilot, a, b, grid="never")
        await pilot.pause()
        assert app.query_one("#panes").current == "compare"
        shown = str(app.pane("compare").query_one("#compare-result").render())
        assert shown.startswith("Compare in one go stopped: start ckpt-a (compare A) could "
                                "not start: [Errno 24] Too many open files"), shown
        assert app.compare_runs.awaited is None and not app.compare_runs.started
        note = str(app.pane("runs").query_one("#run-note").render())
        assert note.startswith("could not start ckpt-b (compare B): [Errno 24]"), note
