"""The Runs pane's form: checking what was typed (before any process or run row exists) and
turning it into `fragility-tui run …` arguments. Apart from the widgets, so a test
checks it without starting the app."""

from __future__ import annotations

import shlex
from pathlib import Path

from fragility_tui.processes import db_args


def run_argv(form: dict, db_path: str | None) -> list[str]:
    """`fragility-tui run …` arguments for the form's values (empty fields left out: no
    items means the shipped starter items, as on the command line)."""
    argv = ["run", "--model", form["model"], "--display", "none"]
    for flag, key in (("--items", "items"), ("--grid", "grid"),
                      ("--per-benchmark", "per_benchmark"), ("--configs", "configs"),
                      ("--quantize", "quantize")):
        if form.get(key):
            argv += [flag, str(form[key])]
    if form.get("device") and form["device"] != "auto":
        argv += ["--device", form["device"]]
    argv += shlex.split(form.get("extra") or "")
    return argv + db_args(db_path)


def check_run_form(form: dict, cwd: Path) -> tuple[dict, list[str]]:
    """(the form with its paths resolved against `cwd`, problems): a model spec or an items
    path that the run process could not use is caught here, before any run row exists.
    Hub ids are checked only for their shape (the hub is asked when the run loads it)."""
    from fragility_tui.items.sources import SOURCE_NAMES, is_named_source
    from fragility_tui.model_aliases import ALIASES

    form, problems = dict(form), []
    for key in ("model", "grid"):
        if not form.get(key):
            problems.append(f"fill in the {key}")
    model = form.get("model") or ""
    path = (cwd / model).expanduser()
    if model and model not in ALIASES:
        if model.endswith(".gguf") or path.exists():
            if not path.exists():
                problems.append(f"model: no such file {path}")
            elif path.is_dir() and not (path / "config.json").is_file():
                problems.append(f"model: {path} has no config.json (not a model folder)")
            form["model"] = str(path.resolve())
        elif model.count("/") != 1 or model.startswith((".", "/", "~")):
            problems.append(f"model: {model!r} is not an alias ({', '.join(ALIASES)}), a "
                            ".gguf file, a model folder or a hub id org/name[@revision]")
    items = form.get("items") or ""
    if items:
        path = (cwd / items).expanduser()
        if path.exists():
            form["items"] = str(path.resolve())
        elif not is_named_source(items):
            problems.append(f"items: no such file or folder {path}, and not a named source "
                            f"({', '.join(SOURCE_NAMES)})")
    if shlex_error := _shlex_problem(form.get("extra") or ""):
        problems.append(shlex_error)
    return form, problems


def _shlex_problem(text: str) -> str | None:
    try:
        shlex.split(text)
    except ValueError as exc:
        return f"extra flags: {exc}"
    return None
