"""What the app does around its first frame: widgets mounted after it, and the keymap
checked after it, so the first frame needs only Textual and the app's own modules
(tests/tui/test_no_torch.py)."""

from __future__ import annotations

from typing import Callable

from textual.lazy import Lazy
from textual.widget import Widget

from fragility_tui.tui.sanitize import clean


class AfterFirstFrame(Lazy):
    """Textual's Lazy (the widget is mounted after the first refresh), except when the screen
    is already gone by then: a quit, or a terminal that hung up, during the start. Lazy
    raises MountError there, a traceback instead of a clean exit; this mounts nothing.

    `AfterFirstFrame(make=f)` makes the widget after the first frame too, so what its class
    imports waits for it as well (the hidden panes: tui/app.py). `f` runs in the app's
    message loop, where the app is the active message pump: it may `data_bind` the
    widget to the app's reactives, as compose does."""

    def __init__(self, widget: Widget | None = None, *,
                 make: Callable[[], Widget] | None = None) -> None:
        if (widget is None) == (make is None):
            raise TypeError("AfterFirstFrame takes either a widget or make=")
        self._widget = widget
        self._make = make
        super().__init__(widget)

    async def mount_composed_widgets(self, widgets) -> None:
        parent = self.parent
        if parent is None:
            return

        async def mount(widget: Widget) -> None:
            if parent.is_attached:
                await parent.mount(widget, after=self)
                await self.remove()

        async def make() -> None:  # in the app's loop: the app is the active message pump
            if parent.is_attached:
                await mount(self._make())

        if self._make is None:
            self.call_after_refresh(mount, self._widget)
        else:
            self.call_after_refresh(self.app.call_later, make)


def apply_keymap(app) -> None:
    """The user's keymap.toml, checked against every binding id, set on `app`. Called after
    the first frame: the ids are read from every screen's class, and the drill-down screens
    import numpy (~0.13 s of the first paint when this ran in on_mount)."""
    from fragility_tui.tui.bindings import binding_ids
    from fragility_tui.tui.keymap import load_keymap

    app.keymap, problems = load_keymap(binding_ids())
    app.set_keymap(app.keymap)
    for problem in problems:
        app.notify(clean(problem, limit=400), title="Keymap not applied", severity="warning",
                   markup=False, timeout=10)
