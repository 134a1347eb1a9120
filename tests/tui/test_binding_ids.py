"""Every key binding the app declares has an id, so keymap.toml can reach it (docs/tui.md)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import fragility_tui.tui as tui
from fragility_tui.tui.bindings import binding_ids, binding_sources
from textual.binding import Binding

from helpers import REPO


def declared_bindings() -> list[tuple[str, object]]:
    """(class, binding) for every BINDINGS entry a class of fragility_tui.tui declares."""
    found, seen = [], set()
    for info in pkgutil.walk_packages(tui.__path__, "fragility_tui.tui."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__.startswith("fragility_tui.") \
                    and "BINDINGS" in cls.__dict__ and cls not in seen:
                seen.add(cls)
                found += [(f"{cls.__module__}.{cls.__qualname__}", b) for b in cls.BINDINGS]
    return found


def test_every_binding_of_every_screen_pane_widget_and_the_app_has_an_id():
    found = declared_bindings()
    assert len(found) > 30  # the walk found the app, its panes, screens and tables
    no_id = [f"{where}: {b!r}" for where, b in found if not isinstance(b, Binding) or not b.id]
    assert not no_id, "bindings without an id:\n" + "\n".join(no_id)


def test_every_declared_binding_is_known_to_the_keymap_and_help():
    """A binding whose class binding_sources() misses would be rejected by keymap.toml."""
    missing = {f"{where}: {b.id}" for where, b in declared_bindings() if b.id not in binding_ids()}
    assert not missing, sorted(missing)


def test_an_id_names_one_action():
    actions: dict[str, set[str]] = {}
    for _, bindings in binding_sources():
        for b in bindings:
            actions.setdefault(b.id, set()).add(b.action)
    assert {i: a for i, a in actions.items() if len(a) > 1} == {}


def test_docs_list_every_binding_id():
    doc = (REPO / "docs" / "tui.md").read_text()
    keys_section = doc.split("**Your own keys.**", 1)[1]
    listed = set(re.findall(r"`([a-z-]+\.(?:[a-z-]+|<name>))`", keys_section))
    ids = {i for i in binding_ids() if not i.startswith("pane.")} | {"pane.<name>"}
    assert ids - listed == set(), f"docs/tui.md's keymap section lacks {sorted(ids - listed)}"
