"""Forms at 80 and 120 columns: labelled run form, selection lists whose cuts keep names apart."""

from __future__ import annotations

import pytest
from textual.widgets import SelectionList

from fragility_tui.text import cut_middle, distinct_labels
from fragility_tui.tui.app import FragilityApp

from .conftest import open_pane, screen_text, wait_ready

pytestmark = pytest.mark.anyio


def test_distinct_labels_widen_a_cut_until_names_differ():
    names = ["smollm2-135m-instruct", "smollm2-135m-instruct+int4", "smollm2-135m-instruct+int8"]
    labels = distinct_labels(names, 12)
    assert len(set(labels)) == 3 and all(len(a) <= len(n) for a, n in zip(labels, names))
    assert labels[1].endswith("int4") and labels[2].endswith("int8")
    assert distinct_labels(["a", "b"], 10) == ["a", "b"]
    assert cut_middle("abcdefghij", 5) == "ab…ij"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_run_form_is_readable(synthetic_store, size):
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=size) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "7")
        text = screen_text(app)
        for label in ("model", "items", "grid", "per bench", "configs", "quantise", "flags"):
            assert f" {label} " in text
        for placeholder in ("alias, hub id or path", "the shipped starter items", "paper (the 26)",
                            "e.g. --batch-size 8", "Start run"):
            assert placeholder in text, placeholder
        # The open grid is synthetic: the form proposes a new grid (issue 60).
        assert app.pane("runs").query_one("#run-grid").value == "my-grid"


async def test_selection_lists_never_cut_two_models_alike(shipped_store, monkeypatch):
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "starter-real")
    app = FragilityApp(str(shipped_store.path))
    async with app.run_test(size=(60, 24)) as pilot:
        await wait_ready(app, pilot, timeout=120)
        await pilot.press("s")
        await pilot.pause()
        await pilot.pause()
        models = app.screen.query_one("#sel-models", SelectionList)
        labels = [str(models.get_option_at_index(k).prompt) for k in range(models.option_count)]
        assert len(set(labels)) == 4 and any("…" in label for label in labels)
        shown = screen_text(app)
        assert all(label in shown for label in labels)


def _labels(app, name: str) -> list[tuple[str, str]]:
    widget = app.screen.query_one(f"#sel-{name}", SelectionList)
    return [(str(widget.get_option_at_index(k).prompt), widget.get_option_at_index(k).value)
            for k in range(widget.option_count)]


async def test_selection_lists_show_whole_names_at_80_columns_and_refit_on_resize(
        synthetic_store):
    """At 80 columns a third of the box each cut "o0.instruct" and "arc_challenge"; the
    configs and benchmarks lists are now as wide as their names. A resize cuts the labels
    again for the new widths, and gives them back when there is room."""
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await pilot.press("s")
        await pilot.pause()
        await pilot.pause()
        for name in ("configs", "models", "benchmarks"):
            assert all(label == value for label, value in _labels(app, name)), name
        await pilot.resize_terminal(50, 24)
        await pilot.pause()
        await pilot.pause()
        models = [label for label, _ in _labels(app, "models")]
        assert any("…" in label for label in models) and len(set(models)) == len(models)
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        await pilot.pause()
        assert all(label == value for label, value in _labels(app, "models"))


async def test_the_selection_form_changes_the_reference(synthetic_store):
    """Issue 24 (9): the app measures against another reference, as `report --reference`
    does, and the reference must stay among the configs in view."""
    from textual.widgets import Select

    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await pilot.press("s")
        await pilot.pause()
        app.screen.query_one("#sel-reference", Select).value = "cloze_qa"
        configs = app.screen.query_one("#sel-configs", SelectionList)
        configs.deselect("cloze_qa")
        await pilot.press("a")
        await pilot.pause()
        assert ("the reference config cloze_qa must be in view"
                in str(app.screen.query_one("#selection-error").render()))
        configs.select("cloze_qa")
        await pilot.press("a")
        await wait_ready(app, pilot)
        assert app.session.selection.reference == "cloze_qa"
        assert app.view.cube.reference == "cloze_qa"
        assert "selection: everything · reference cloze_qa" in screen_text(app)
        cube = app.view.cube
        k = cube.configs.index("cloze_qa")
        expected = cube.bits[:, :, k].mean(axis=1)
        shown = {b.band.model: b.band.reference for b in app.view.report.bands}
        assert [shown[m] for m in cube.models] == pytest.approx(expected.tolist())
        # the form opens on the reference in force; r goes back to the grid's default
        await pilot.press("s")
        await pilot.pause()
        assert app.screen.query_one("#sel-reference", Select).value == "cloze_qa"
        await pilot.press("r", "a")
        await wait_ready(app, pilot)
        assert app.session.selection.reference is None and app.view.cube.reference == "o0.letter"
