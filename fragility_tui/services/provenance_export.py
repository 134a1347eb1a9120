"""A grid's provenance as an exported document (`export --what provenance`): its models and
runs with every machine path reduced to the file it names, as JSON or Markdown."""

from __future__ import annotations

import re

from fragility_tui.provenance import provenance_card
from fragility_tui.services.documents import md_escape

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
    runs = [r.to_dict() for r in store.runs(grid)]
    return strip_local_paths({
        "grid": grid, "synthetic": meta["synthetic"], "description": meta["description"],
        "item_set_hash": meta.get("item_set_hash"), "models": store.list_models(grid),
        "runs": runs})


def provenance_markdown(doc: dict) -> str:
    kind = "SYNTHETIC" if doc["synthetic"] else "real"
    lines = [f"# Provenance of grid {md_escape(doc['grid'])} ({kind})", "",
             md_escape(doc["description"]), "", "## Models", "",
             "| model | source | revision | dtype | quantization | base model |",
             "|---|---|---|---|---|---|"]
    for m in doc["models"]:
        lines.append("| " + " | ".join(md_escape(m.get(k)) for k in
                                        ("model", "source", "revision", "dtype", "quantization",
                                         "base_model")) + " |")
    imports = [(m["model"], e) for m in doc["models"]
               for e in (m.get("provenance") or {}).get("imports") or []]
    if imports:
        lines += ["", "## Imported logs", "",
                  "| model | config | harness | log file | imported at | harness version |",
                  "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(md_escape(v) for v in (
            model, e.get("config"), e.get("harness"), e.get("imported_from"),
            e.get("imported_at"), _harness_version(e.get("log") or {}))) + " |"
            for model, e in imports]
    lines += ["", "## Runs", ""]
    if not doc["runs"]:
        lines.append("No evaluation runs recorded for this grid" + (
            " (its cells came from the logs above)." if imports else
            " (imported or simulated)."))
    for run in doc["runs"]:
        lines += [f"### Run {md_escape(run['run_id'])}", "", "```", provenance_card(run), "```", ""]
    return "\n".join(lines) + "\n"


def _harness_version(log: dict) -> str | None:
    """The version a log names for the harness that wrote it, where it names one."""
    for key in ("harness_version", "lm_eval_version", "inspect_version", "lighteval_version",
                "helm_version", "version"):
        if log.get(key):
            return str(log[key])
    return None
