"""`fragility-tui export --what cells|report|provenance --format csv|parquet|json|markdown`.

Every export is written to a temporary name and renamed, so a reader never sees half a
file. Cells go to all four formats; the report and the provenance are documents, so JSON
and Markdown only (a tabular request for them is refused with the alternatives).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from fragility_tui.errors import InputError

WHAT_FORMATS = {
    "cells": ("csv", "parquet", "json", "markdown", "lmeval-samples"),
    "report": ("json", "markdown"),
    "provenance": ("json", "markdown"),
}


def check_request(what: str, fmt: str) -> None:
    if fmt not in WHAT_FORMATS[what]:
        raise InputError(f"--what {what} exports as {', '.join(WHAT_FORMATS[what])}, not {fmt}",
                         field="--format")


def write_atomic(out: str | Path, text: str) -> None:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)


def md_escape(value) -> str:
    """A Markdown table cell: pipes escaped, line breaks as <br>, None empty."""
    if value is None:
        return ""
    text = json.dumps(value) if isinstance(value, list) else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def cells_json(table) -> str:
    return json.dumps(table.to_pylist(), ensure_ascii=False, indent=1)


def cells_markdown(table, grid: str) -> str:
    names = table.column_names
    lines = [f"# Cells of grid {md_escape(grid)}", "",
             "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in table.to_pylist():
        lines.append("| " + " | ".join(md_escape(row[n]) for n in names) + " |")
    return "\n".join(lines) + "\n"


# An absolute path inside a string: "/" or "~/" or "C:\\" not inside a word, up to a space or
# quote. Only its last part is kept (what it names); hashes next to it identify the content.
_LOCAL_PATH = re.compile(r"(?<![\w.~/-])(?:~?/|[A-Za-z]:\\)[^\s'\"(),;]+")


def strip_local_paths(value):
    """`value` with every absolute machine path replaced by its last component, so an
    exported or shipped provenance names files (and their hashes), never a machine's
    layout."""
    if isinstance(value, str):
        return _LOCAL_PATH.sub(lambda m: re.split(r"[/\\]", m.group(0).rstrip("/\\"))[-1]
                               or m.group(0), value)
    if isinstance(value, dict):
        return {k: strip_local_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strip_local_paths(v) for v in value]
    return value


def provenance_document(store, grid: str) -> dict:
    meta = store.grid_meta(grid)
    runs = [r for r in store.list_runs(grid)]
    return strip_local_paths({
        "grid": grid, "synthetic": meta["synthetic"], "description": meta["description"],
        "item_set_hash": meta.get("item_set_hash"), "models": store.list_models(grid),
        "runs": runs})


def provenance_markdown(doc: dict) -> str:
    from fragility_tui.provenance import provenance_card

    kind = "SYNTHETIC" if doc["synthetic"] else "real"
    lines = [f"# Provenance of grid {md_escape(doc['grid'])} ({kind})", "",
             md_escape(doc["description"]), "", "## Models", "",
             "| model | source | revision | dtype | quantization | base model |",
             "|---|---|---|---|---|---|"]
    for m in doc["models"]:
        lines.append("| " + " | ".join(md_escape(m.get(k)) for k in
                                        ("model", "source", "revision", "dtype", "quantization",
                                         "base_model")) + " |")
    lines += ["", "## Runs", ""]
    if not doc["runs"]:
        lines.append("No evaluation runs recorded for this grid (imported or simulated).")
    for run in doc["runs"]:
        lines += [f"### Run {md_escape(run['run_id'])}", "", "```", provenance_card(run), "```", ""]
    return "\n".join(lines) + "\n"


def export(store, *, grid: str, what: str, fmt: str, out: str, model: str | None = None,
           config: str | None = None, report_options: dict | None = None) -> str:
    """Write one export; returns a one-line summary for the user."""
    check_request(what, fmt)
    store.grid_info(grid)  # a clear error for an unknown grid
    if what == "cells":
        if fmt == "lmeval-samples":
            from fragility_tui.store.lmeval import export_samples

            if not model or not config:
                raise InputError("--format lmeval-samples needs --model and --config",
                                 field="--format")
            return f"wrote {export_samples(store, grid, model, config, out)} lm-eval samples to {out}"
        if fmt in ("csv", "parquet"):
            from fragility_tui.store.importer import export_cells

            return f"wrote {export_cells(store, grid, out, fmt)} cells to {out}"
        table = store.export_cells(grid)
        write_atomic(out, cells_json(table) if fmt == "json" else cells_markdown(table, grid))
        return f"wrote {table.num_rows} cells to {out}"
    if what == "report":
        from fragility_tui.analysis.report import render_markdown

        report = grid_report(store, grid, **(report_options or {}))
        write_atomic(out, json.dumps(report, indent=2, allow_nan=False) + "\n" if fmt == "json"
                     else render_markdown(report) + "\n")
        return f"wrote the report of {grid} to {out}"
    doc = provenance_document(store, grid)
    write_atomic(out, json.dumps(doc, indent=2, default=str) + "\n" if fmt == "json"
                 else provenance_markdown(doc))
    return f"wrote the provenance of {grid} ({len(doc['runs'])} runs) to {out}"


def grid_report(store, grid: str, *, cube=None, reference: str | None = None,
                **options) -> dict:
    """The report of a grid (or of `cube`, a selection of it, which carries its own
    reference), with each model's cost per item from its runs: what `report` prints and
    `export --what report` writes. reference: for a whole grid, the config to measure
    against (default: `configs.default_reference` of the grid's configs)."""
    from fragility_tui.analysis.report import build_report

    cube = _measured_cube(store, grid, cube, reference, "a report measures everything")
    return build_report(cube, name=grid, costs=store.model_costs(grid),
                        near_tie=store.near_tie_mask(grid, cube), **options)


def _measured_cube(store, grid: str, cube, reference: str | None, purpose: str):
    """The grid's cube with its reference chosen (or `cube` as given), which must hold
    cells of that reference: `purpose` (e.g. "a report measures everything") says why."""
    if cube is None:
        cube = choose_reference(store.load_cube(grid), reference)
    if cube.reference not in cube.configs:
        raise InputError(f"grid {grid!r} has no cells for the reference config "
                         f"{cube.reference}; {purpose} against it", field="--grid")
    return cube


def choose_reference(cube, reference: str | None):
    """The grid's cube measured against `reference` (--reference), or against the default
    reference of its configs (`configs.default_reference`); an unknown id or one the grid
    has no cells for is an InputError naming --reference."""
    from fragility_tui.harness.configs import CONFIG_BY_ID, CONFIG_IDS, default_reference

    if reference is None:
        reference = default_reference(cube.configs)
        if reference is None:
            raise InputError("the grid has no cells", field="--grid")
        return cube.with_reference(reference)
    if reference not in CONFIG_BY_ID:
        raise InputError(f"unknown config {reference!r}; known: {', '.join(CONFIG_IDS)}",
                         field="--reference")
    if reference not in cube.configs:
        raise InputError(f"the grid has no cells for {reference}; it has "
                         f"{', '.join(cube.configs)}", field="--reference")
    return cube.with_reference(reference)


def grid_calibration(store, grid: str, *, cube=None, reference: str | None = None,
                     pairs=None, **settings) -> dict:
    """Verdict calibration (analysis/calibration.py) of a grid's adjacent pairs, or of
    `pairs`, reusing the tallies the store keeps for this content and these settings
    (store/calibration_cache.py) and keeping the ones computed now. `store`: a Store or
    anything with its load_cube / calibration_results / save_calibration (the app's
    StoreGateway). The result says how many pairs came from the cache."""
    from fragility_tui.analysis import calibration

    cube = _measured_cube(store, grid, cube, reference, "a calibration measures every verdict")
    key = calibration.cache_key(cube, calibration.settings(cube, **settings))
    cached = store.calibration_results(grid, key)
    result = calibration.calibrate(cube, pairs, cached=cached, **settings)
    new = result.pop("new")
    store.save_calibration(grid, key, new)
    result["grid"] = grid
    result["cache"] = {"key": key, "pairs_reused": len(result["pairs"]) - len(new),
                       "pairs_computed": len(new)}
    return result
