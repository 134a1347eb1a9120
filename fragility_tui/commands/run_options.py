"""`run`'s options, declared in run_options.toml (one table to read and review the whole
command line of `run`) and added to its parser here, group by group.

Every key is checked: a misspelt or unknown one fails at start-up naming the file and the
option, instead of silently changing what a flag does.
"""

from __future__ import annotations

from pathlib import Path

from fragility_tui.backends import DEFAULT_BACKEND, backend_names
from fragility_tui.items.item import DEFAULT_PER_BENCHMARK
from fragility_tui.tomlfile import tomllib

TABLE = Path(__file__).with_name("run_options.toml")
TYPES = {"int": int, "float": float}
ACTIONS = ("store_true", "append")
KEYS = {"flag", "action", "nargs", "const", "type", "default", "choices", "metavar", "help"}
# defaults and choices owned by code, not the table
DEFAULTS = {"--per-benchmark": DEFAULT_PER_BENCHMARK, "--backend": DEFAULT_BACKEND}
CHOICES = {"--backend": backend_names}  # fragility_tui/backends.py: one list of backends


class OptionTableError(ValueError):
    pass


def add_run_options(parser, path: Path = TABLE, only=None, title: str | None = None) -> None:
    """Each [[group]] of the table becomes an argument group of parser, in table order.
    only: the flags to add (another command sharing some of run's options, e.g. `compare
    --items`), under one group titled `title`; every flag named must be in the table."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    if only is not None:
        section = parser.add_argument_group(title)
        found = set()
        for group in doc.get("group", []):
            for option in group.get("option", []):
                flag, kwargs = _argparse_kwargs(option, path)
                if flag in only:
                    section.add_argument(flag, **kwargs)
                    found.add(flag)
        missing = sorted(set(only) - found)
        if missing:
            raise OptionTableError(f"{path}: no option {', '.join(missing)}")
        return
    for group in doc.get("group", []):
        section = parser.add_argument_group(group["title"])
        for option in group.get("option", []):
            flag, kwargs = _argparse_kwargs(option, path)
            section.add_argument(flag, **kwargs)


def _argparse_kwargs(option: dict, path: Path) -> tuple[str, dict]:
    flag = option.get("flag")
    if not isinstance(flag, str) or not flag.startswith("--"):
        raise OptionTableError(f"{path}: an option has no flag (or one not starting --): {option}")
    unknown = sorted(set(option) - KEYS)
    if unknown:
        raise OptionTableError(f"{path}: {flag}: unknown key(s) {', '.join(unknown)}; "
                               f"known: {', '.join(sorted(KEYS))}")
    if option.get("action", "store") not in ("store", *ACTIONS):
        raise OptionTableError(f"{path}: {flag}: action must be one of {', '.join(ACTIONS)}")
    kwargs = {key: value for key, value in option.items() if key != "flag"}
    if "type" in kwargs:
        if kwargs["type"] not in TYPES:
            raise OptionTableError(f"{path}: {flag}: type must be one of {', '.join(TYPES)}")
        kwargs["type"] = TYPES[kwargs["type"]]
    if "choices" in kwargs:
        kwargs["choices"] = tuple(kwargs["choices"])
    if flag in DEFAULTS:
        kwargs["default"] = DEFAULTS[flag]
    if flag in CHOICES:
        kwargs["choices"] = CHOICES[flag]()
    return flag, kwargs
