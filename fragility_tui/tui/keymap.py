"""The user's keymap: `keymap.toml` in the platformdirs config dir (`$FRAGILITY_CONFIG_DIR`
overrides the folder) remaps any binding by its id, e.g.

    [keymap]
    "app.help" = "h"          # F1 becomes h
    "pane.bands" = "b,2"      # two keys for the Bands pane

`F1` in the app lists every binding with its id. A file that cannot be read, or an id or
key that is not valid, is reported by name and line and the defaults stay.
"""

from __future__ import annotations

from pathlib import Path

from fragility_tui.settings import config_dir
from fragility_tui.tomlfile import tomllib

FILE_NAME = "keymap.toml"


def load_keymap(known_ids: set[str], path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """({binding id: keys}, problems) from the keymap file; ({}, []) when there is none."""
    path = path or config_dir() / FILE_NAME
    if not path.is_file():
        return {}, []
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return {}, [f"{path}: cannot read: {exc}"]
    except tomllib.TOMLDecodeError as exc:  # its message names the line and column
        return {}, [f"{path}: {exc}"]
    table = doc.get("keymap", {})
    if not isinstance(table, dict):
        return {}, [f"{path}: [keymap] must be a table of binding id = \"keys\""]
    keymap, problems = {}, []
    for binding_id, keys in table.items():
        if binding_id not in known_ids:
            problems.append(f"{path}: [keymap] {binding_id!r} is not a binding id "
                            "(F1 lists them)")
        elif not isinstance(keys, str) or not keys.strip():
            problems.append(f"{path}: [keymap] {binding_id!r} must be a non-empty string of "
                            "keys, e.g. \"h\" or \"ctrl+h,f2\"")
        else:
            keymap[binding_id] = keys.strip()
    return keymap, problems
