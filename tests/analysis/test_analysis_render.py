"""Text and Markdown renderings of the report."""

from __future__ import annotations

from fragility_tui.analysis.report import build_report, report_of
from fragility_tui.analysis.report_text import render_markdown, render_text

from analysis_grids import TINY, TINY_BENCHMARKS, make_cube


def _report(names=None):
    rows = TINY if names is None else dict(zip(names, TINY.values()))
    return report_of(make_cube(rows, TINY_BENCHMARKS), n_boot=50, k=3, n_random=10,
                     name="tiny")


def test_text_fits_100_columns_even_with_long_names():
    long = ["meta-llama/Llama-3.1-70B-Instruct-extremely-long-name",
            "Qwen/Qwen2.5-72B-Instruct-with-a-long-suffix-too", "x\x1b[31mred"]
    text = render_text(_report(long))
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "\x1b" not in text  # untrusted names lose control characters
    for title in ("Bands", "Pairs", "Configs", "Rankings", "Axis ablation", "Discrimination",
                  "Decisions"):
        assert title in text


def test_cut_names_stay_distinct():
    """Two builds of one model whose names differ only at the end are never printed alike
    (report --grid starter-real printed 'smollm2-135m-instruct+i…' twice)."""
    names = ["smollm2-135m-instruct-with-a-long-org-prefix+int4",
             "smollm2-135m-instruct-with-a-long-org-prefix+int8", "m3"]
    text = render_text(_report(names), width=70)
    decisions = text[text.index("Decisions"):]
    assert "int4" in decisions and "int8" in decisions
    shown = {line.split()[0] for line in decisions.splitlines()[2:] if "int" in line}
    assert len(shown) >= 2, shown


def test_text_shows_the_numbers():
    text = render_text(_report())
    band_m1 = next(line for line in text.splitlines() if " m1 " in line)
    assert "66.7" in band_m1 and "o1.letter" in band_m1
    assert "one item" in text and "cancel" in text


def test_markdown_tables_escape_pipes():
    md = render_markdown(_report(["a|b", "m2", "m3"]))
    assert "| a\\|b |" in md or "a\\|b" in md
    table_lines = [line for line in md.splitlines() if line.startswith("|")]
    header = table_lines[0]
    assert header.count("|") == table_lines[2].replace("\\|", "").count("|")


def test_costs_are_shown_beside_accuracy_not_folded_in():
    cube = make_cube(TINY, TINY_BENCHMARKS)
    plain = build_report(cube, n_boot=50, k=3, n_random=10)
    costs = {"m1": {"seconds_per_item": 0.5, "tokens_per_item": 12.0}, "m3": {}}
    with_costs = build_report(cube, n_boot=50, k=3, n_random=10, costs=costs)
    assert with_costs.pop("costs") == {
        "m1": {"seconds_per_item": 0.5, "tokens_per_item": 12.0},
        "m2": {"seconds_per_item": None, "tokens_per_item": None},
        "m3": {"seconds_per_item": None, "tokens_per_item": None}}
    assert plain.pop("costs") is None and with_costs == plain
    assert "Cost per item" in render_text(report_of(cube, n_boot=50, k=3, n_random=10,
                                                    costs=costs))
