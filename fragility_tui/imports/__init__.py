"""Other harnesses' logs → one grid's cells (SPEC v5 §2b imported configs).

One module per format, each with `NAME`, `sniff(path)`, `expand(path)` (the files a path
holds) and `read(file, model=, metric=) -> [LogRun]`, registered here the way the runner's
backends are; `pipeline.py` matches their samples to items and makes the cells; SQL stays
in store/ (store/log_import.py)."""

from __future__ import annotations

from importlib import import_module

# format name -> module; the formats' own names and common aliases
FORMATS = {
    "lm-eval": "fragility_tui.imports.lmeval_log",
    "inspect": "fragility_tui.imports.inspect_log",
    "lighteval": "fragility_tui.imports.lighteval_log",
    "every-eval-ever": "fragility_tui.imports.eee_log",
    "helm": "fragility_tui.imports.helm_log",
}
ALIASES = {"lmeval": "lm-eval", "lm_eval": "lm-eval", "lm-evaluation-harness": "lm-eval",
           "inspect-ai": "inspect", "inspect_ai": "inspect", "eee": "every-eval-ever",
           "every_eval_ever": "every-eval-ever", "crfm-helm": "helm"}


def reader(name: str):
    """The module of a format name (or alias); KeyError names the known ones."""
    key = ALIASES.get(name, name)
    if key not in FORMATS:
        raise KeyError(f"unknown log format {name!r}; known: {', '.join(FORMATS)}")
    return import_module(FORMATS[key])


def readers():
    return [import_module(m) for m in FORMATS.values()]
