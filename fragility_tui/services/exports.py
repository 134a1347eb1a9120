"""`fragility-tui export --what cells|report|provenance --format csv|parquet|json|markdown`.

Every export is written to a temporary name and renamed, so a reader never sees half a
file. Cells go to all four formats; the report and the provenance are documents, so JSON
and Markdown only (a tabular request for them is refused with the alternatives).
"""

from __future__ import annotations

import json
from fragility_tui.errors import InputError
from fragility_tui.services.documents import md_escape, write_document
from fragility_tui.services.provenance_export import provenance_document, provenance_markdown
from fragility_tui.text import clean, finite, visible_text

WHAT_FORMATS = {
    "cells": ("csv", "parquet", "json", "markdown", "lmeval-samples"),
    "report": ("json", "markdown"),
    "provenance": ("json", "markdown"),
}


def check_request(what: str, fmt: str) -> None:
    if fmt not in WHAT_FORMATS[what]:
        raise InputError(f"--what {what} exports as {', '.join(WHAT_FORMATS[what])}, not {fmt}",
                         field="--format")


def cells_json(table) -> str:
    return json.dumps(table.to_pylist(), ensure_ascii=False, indent=1)


def cells_markdown(table, grid: str) -> str:
    names = table.column_names
    lines = [f"# Cells of grid {md_escape(grid)}", "",
             "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in table.to_pylist():
        lines.append("| " + " | ".join(md_escape(row[n]) for n in names) + " |")
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
        write_document(out, cells_json(table) if fmt == "json"
                     else visible_text(cells_markdown(table, grid)))
        return f"wrote {table.num_rows} cells to {out}"
    if what == "report":
        from fragility_tui.analysis.report_text import render_markdown
        from fragility_tui.services.reports import grid_report

        report = grid_report(store, grid, **(report_options or {}))
        write_document(out, json.dumps(report.to_json(), indent=2, allow_nan=False) + "\n"
                     if fmt == "json" else visible_text(render_markdown(report) + "\n"))
        return f"wrote the report of {clean(grid, one_line=True)} to {out}"
    doc = provenance_document(store, grid)
    write_document(out, json.dumps(finite(doc), indent=2, default=str, allow_nan=False) + "\n"
                 if fmt == "json"
                 else visible_text(provenance_markdown(doc)))
    return (f"wrote the provenance of {clean(grid, one_line=True)} ({len(doc['runs'])} runs) "
            f"to {out}")
