"""fragility_tui/settings.py is the one reader of FRAGILITY_* variables and the app's folders."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fragility_tui import settings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ROOT / "fragility_tui" / "settings.py"
ENV_CALLS = {"get", "getenv", "pop", "setdefault", "environ"}


def env_reads(source: str) -> list[tuple[int, str]]:
    """(line, variable) for every FRAGILITY_* name read from the environment: os.environ.get(…),
    os.getenv(…), os.environ[…], `… in os.environ`, os.environ.pop/setdefault(…)."""
    found = []

    def fragility(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith("FRAGILITY_"):
            return node.value
        return None

    def mentions_environ(node) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv")
                   or isinstance(n, ast.Name) and n.id in ("environ", "getenv")
                   for n in ast.walk(node))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and mentions_environ(node.func):
            names = [fragility(a) for a in node.args]
        elif isinstance(node, ast.Subscript) and mentions_environ(node.value):
            names = [fragility(node.slice)]
        elif isinstance(node, ast.Compare) and any(mentions_environ(c) for c in node.comparators):
            names = [fragility(node.left)]
        else:
            continue
        found += [(node.lineno, n) for n in names if n]
    return found


def test_the_scanner_finds_each_way_of_reading_a_variable():
    planted = ("import os\nfrom os import environ, getenv\n"
               "a = os.environ.get('FRAGILITY_A')\nb = os.getenv('FRAGILITY_B', '1')\n"
               "c = os.environ['FRAGILITY_C']\nd = 'FRAGILITY_D' in os.environ\n"
               "e = environ.get('FRAGILITY_E')\nf = getenv('FRAGILITY_F')\n"
               "g = os.environ.get('HOME')\nh = print('set FRAGILITY_TUI_DEBUG=1')\n")
    assert [n for _, n in env_reads(planted)] == [f"FRAGILITY_{c}" for c in "ABCDEF"]


def test_no_module_but_settings_reads_a_fragility_variable():
    offenders = []
    for path in sorted([*(ROOT / "fragility_tui").rglob("*.py"), *(ROOT / "runners").rglob("*.py")]):
        if path == SETTINGS:
            continue
        for line, name in env_reads(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(ROOT)}:{line} reads {name}")
    assert not offenders, ("read FRAGILITY_* variables through fragility_tui/settings.py:\n"
                           + "\n".join(offenders))


def test_every_variable_settings_reads_is_in_its_table():
    read = {n for _, n in env_reads(SETTINGS.read_text())}
    read |= set(re.findall(r'_get\("(FRAGILITY_[A-Z_]+)"\)', SETTINGS.read_text()))
    assert read == {name for name, _, _ in settings.VARIABLES}


def test_settings_are_read_when_asked_not_at_import(monkeypatch, tmp_path):
    monkeypatch.setenv("FRAGILITY_TUI_DB", str(tmp_path / "a.duckdb"))
    monkeypatch.setenv("FRAGILITY_TUI_GRID", "g1")
    monkeypatch.setenv("FRAGILITY_CONFIG_DIR", str(tmp_path / "conf"))
    monkeypatch.setenv("FRAGILITY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FRAGILITY_LOCK_WAIT_S", "2.5")
    monkeypatch.setenv("FRAGILITY_TUI_DEBUG", "1")
    assert settings.db_path_override() == str(tmp_path / "a.duckdb")
    assert settings.start_grid() == "g1"
    assert settings.config_dir() == tmp_path / "conf"
    assert settings.cache_dir() == tmp_path / "cache"
    assert settings.lock_wait_s() == 2.5
    assert settings.debug()
    for name, _, _ in settings.VARIABLES:
        monkeypatch.setenv(name, "")  # empty means unset
    assert settings.db_path_override() is None and settings.start_grid() is None
    assert not settings.debug()
    assert settings.lock_wait_s() == settings.DEFAULT_LOCK_WAIT_S
    assert settings.config_dir().name == "fragility-tui"


@pytest.mark.parametrize("raw", ["soon", "-1", "nan"])
def test_a_bad_lock_wait_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("FRAGILITY_LOCK_WAIT_S", raw)
    with pytest.raises(ValueError, match="FRAGILITY_LOCK_WAIT_S .* got"):
        settings.lock_wait_s()


def test_the_cpu_linear_switch_takes_auto_or_default_and_names_itself_otherwise(monkeypatch):
    from fragility_tui import settings

    monkeypatch.delenv("FRAGILITY_CPU_LINEAR", raising=False)
    assert settings.cpu_linear_kernel() == "auto"
    monkeypatch.setenv("FRAGILITY_CPU_LINEAR", " Default ")
    assert settings.cpu_linear_kernel() == "default"
    monkeypatch.setenv("FRAGILITY_CPU_LINEAR", "mkl")
    with pytest.raises(ValueError, match="FRAGILITY_CPU_LINEAR must be one of auto, default"):
        settings.cpu_linear_kernel()
