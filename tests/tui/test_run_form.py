"""The Runs pane's form (tui/panes/run_form.py): checked and its paths resolved before a
process or run row exists."""

from __future__ import annotations

from fragility_tui.tui.panes.run_form import check_run_form, run_argv


def test_a_run_form_is_checked_and_its_paths_resolved_before_launch(tmp_path):
    (tmp_path / "items.jsonl").write_text("{}\n")
    form, problems = check_run_form({"model": "smollm2-135m-instruct", "items": "items.jsonl",
                                     "grid": "g"}, tmp_path)
    assert problems == [] and form["items"] == str(tmp_path / "items.jsonl")
    form, problems = check_run_form({"model": "org/name@main", "items": "", "grid": "g"},
                                    tmp_path)
    assert problems == [] and "--items" not in run_argv(form, None)  # the starter items
    _, problems = check_run_form({"model": "smolm2", "items": "nope.jsonl", "grid": ""},
                                 tmp_path)
    assert any(p.startswith("model: 'smolm2' is not an alias") for p in problems)
    assert any(p.startswith(f"items: no such file or folder {tmp_path / 'nope.jsonl'}")
               for p in problems)
    assert "fill in the grid" in problems
    _, problems = check_run_form({"model": "missing.gguf", "grid": "g",
                                  "extra": "--threads '2"}, tmp_path)
    assert any("no such file" in p and "missing.gguf" in p for p in problems)
    assert any(p.startswith("extra flags:") for p in problems)
