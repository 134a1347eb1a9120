"""The open grid's session (tui/session.py) driven without the app: which views it computes
from which reads, and which of them replace the one on screen. That it imports no Textual is
an import contract (pyproject.toml, "The headless core never imports textual")."""

from __future__ import annotations

import pytest

from fragility_tui.grid.simulate import simulate
from fragility_tui.tui import session as session_module
from fragility_tui.tui.selection import Selection
from fragility_tui.tui.session import GridSession


class ScriptedReader:
    """The store's grid reads, counted."""

    def __init__(self):
        grid = simulate(3, 30, 1)
        self.grid = (grid.cube, {it.item_uid: it for it in grid.items},
                     {"synthetic": True, "seed": 1})
        self.reads: list[str] = []

    def load_grid(self, name: str):
        self.reads.append(name)
        return self.grid


@pytest.fixture
def reader():
    return ScriptedReader()


def computed(session: GridSession, grid: str, shown=None, selection=Selection()) -> list:
    return list(session.views(grid, selection, shown, progress=lambda text: None))


def test_a_small_grid_gives_one_full_view_and_a_ready_status(reader):
    baselines: list[str] = []
    session = GridSession(reader, before_read=baselines.append)
    session.start("g")
    (view,) = computed(session, "g")
    assert not view.partial and reader.reads == ["g"] and baselines == ["g"]
    assert session.computing and session.shows(view, None, "g")
    assert "ready" in session.shown(view, 0.5) and not session.computing


def test_the_cube_on_screen_is_reused_until_a_reload_asks_for_a_new_read(reader):
    session = GridSession(reader, before_read=lambda grid: None)
    (view,) = computed(session, "g")
    computed(session, "g", shown=view, selection=Selection(models=view.full.models[:2]))
    assert reader.reads == ["g"]  # a new selection reads nothing
    session.start("g", reload=True)
    computed(session, "g", shown=view)
    assert reader.reads == ["g", "g"]


def test_a_big_grid_shows_its_bands_first_and_a_reload_keeps_the_full_view(reader,
                                                                           monkeypatch):
    monkeypatch.setattr(session_module, "FIRST_SECTIONS_CELLS", 1)
    session = GridSession(reader, before_read=lambda grid: None)
    first, full = computed(session, "g")
    assert first.partial and not full.partial and full.basis is first.basis
    assert "bands ready" in session.shown(first, 0.1) and session.computing
    again, _ = computed(session, "g", shown=full)
    assert not session.shows(again, full, "g")  # the full view stays until the new one
    assert not session.shows(full, None, "other")  # a grid switch overtook it

