"""Every `FRAGILITY_*` environment variable and the app's folders, read here and nowhere else.

Each setting is a function, read when it is asked for (not at import), so a test that sets a
variable with monkeypatch, or a process started with a different environment, sees its own
value. `VARIABLES` is the table docs/architecture.md shows (tests/test_docs.py keeps the two
equal); tests/test_settings.py fails when another module of fragility_tui/ or runners/ reads a
`FRAGILITY_*` variable itself.

Bottom layer: standard library only (platformdirs is imported where a folder is asked for).
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "fragility-tui"
DEFAULT_LOCK_WAIT_S = 120.0

# (variable, default, what it does): the table of docs/architecture.md "Settings".
VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("FRAGILITY_TUI_DB", "the user data folder's `fragility.duckdb`",
     "the store file when `--db` is not given"),
    ("FRAGILITY_TUI_GRID", "the grid with the most cells",
     "the grid the app opens at start (ignored when no grid has that name)"),
    ("FRAGILITY_TUI_DEBUG", "unset",
     "any non-empty value: an internal failure raises its traceback instead of one line"),
    ("FRAGILITY_LOCK_WAIT_S", "120",
     "seconds a process waits for another one's store lock before \"store busy\""),
    ("FRAGILITY_CONFIG_DIR", "`platformdirs.user_config_dir(\"fragility-tui\")`",
     "the config folder (`keymap.toml`)"),
    ("FRAGILITY_CACHE_DIR", "`platformdirs.user_cache_dir(\"fragility-tui\")`",
     "the runner's cache: dequantised GGUF models, file digests"),
    ("FRAGILITY_GPU_SLOTS", "1",
     "runs at once per GPU (0 = no limit); more wait as `queued` (slots.py)"),
    ("FRAGILITY_CPU_SLOTS", "0",
     "runs at once on the CPU (0 = no limit: CPU runs are not queued unless set)"),
    ("FRAGILITY_CPU_LINEAR", "auto",
     "`default`: fp32 linear layers on a CPU keep torch's kernel instead of oneDNN on packed "
     "weights, whatever the start-up measurement says (runners/models/cpu_linear.py)"),
)
CPU_LINEAR_CHOICES = ("auto", "default")


def _get(name: str) -> str | None:
    """The variable's value, None when it is unset or empty (an empty value means unset)."""
    return os.environ.get(name) or None


def db_path_override() -> str | None:
    """$FRAGILITY_TUI_DB: the store file when `--db` is not given."""
    return _get("FRAGILITY_TUI_DB")


def start_grid() -> str | None:
    """$FRAGILITY_TUI_GRID: the grid the app opens at start."""
    return _get("FRAGILITY_TUI_GRID")


def debug() -> bool:
    """$FRAGILITY_TUI_DEBUG: raise internal failures with their traceback."""
    return _get("FRAGILITY_TUI_DEBUG") is not None


def lock_wait_s() -> float:
    """$FRAGILITY_LOCK_WAIT_S: how long opening the store waits for another process's lock."""
    raw = _get("FRAGILITY_LOCK_WAIT_S")
    if raw is None:
        return DEFAULT_LOCK_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 0:  # also rejects NaN
        raise ValueError(f"FRAGILITY_LOCK_WAIT_S must be a number of seconds >= 0, got {raw!r}")
    return value


def device_slots(device: str, environ=None) -> int:
    """$FRAGILITY_GPU_SLOTS / $FRAGILITY_CPU_SLOTS: runs a device takes at once (0 = no
    limit); a value that is not a whole number >= 0 is a ValueError naming the variable."""
    environ = os.environ if environ is None else environ
    if device == "cpu":
        name, default, text = "FRAGILITY_CPU_SLOTS", 0, environ.get("FRAGILITY_CPU_SLOTS", "")
    else:
        name, default, text = "FRAGILITY_GPU_SLOTS", 1, environ.get("FRAGILITY_GPU_SLOTS", "")
    text = text.strip()
    if not text:
        return default
    if not text.isdigit():
        raise ValueError(f"{name} must be a whole number of runs at once (0 = no limit), "
                         f"got {text!r}")
    return int(text)


def cpu_linear_kernel() -> str:
    """$FRAGILITY_CPU_LINEAR: "auto" (oneDNN on packed weights where measured faster) or
    "default" (torch's kernel); another value is a ValueError naming the variable."""
    value = (_get("FRAGILITY_CPU_LINEAR") or "auto").strip().lower()
    if value not in CPU_LINEAR_CHOICES:
        raise ValueError(f"FRAGILITY_CPU_LINEAR must be one of {', '.join(CPU_LINEAR_CHOICES)}, "
                         f"got {value!r}")
    return value


def config_dir() -> Path:
    """The config folder (`keymap.toml`): $FRAGILITY_CONFIG_DIR, else the platformdirs one."""
    override = _get("FRAGILITY_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))


def cache_dir() -> Path:
    """The runner's cache folder: $FRAGILITY_CACHE_DIR, else the platformdirs one."""
    override = _get("FRAGILITY_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME))


def data_dir() -> Path:
    """The user data folder: the default store, run event logs, a launcher's parts."""
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME))
