"""What the app does around its first frame: widgets mounted after it, and the keymap
checked after it, so the first frame needs only Textual and the app's own modules
(tests/tui/test_no_torch.py)."""

from __future__ import annotations

from textual.lazy import Lazy

from fragility_tui.tui.sanitize import clean


class AfterFirstFrame(Lazy):
    """Textual's Lazy (the widget is mounted after the first refresh), except when the screen
    is already gone by then: a quit, or a terminal that hung up, during the start. Lazy
    raises MountError there, a traceback instead of a clean exit; this mounts nothing."""

    def __init__(self, widget) -> None:
        self._widget = widget
        super().__init__(widget)

    async def mount_composed_widgets(self, widgets) -> None:
        parent = self.parent
        if parent is None:
            return

        async def mount() -> None:
            if parent.is_attached:
                await parent.mount(self._widget, after=self)
                await self.remove()

        self.call_after_refresh(mount)


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
