"""The app's bottom lines at any width: the status line and the footer's key list.

At 80 columns both were cut mid-word: the status line lost its last words (`F1 help`, the way
to every key), and Textual's footer scrolls the keys past its width under the palette key,
showing `x Exp▏^p palette`. Here the status line keeps `F1 help` and cuts what comes before
it with an ellipsis, and the footer leaves out the keys that do not fit whole (F1 lists
them all)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey

from fragility_tui.text import cut_middle

HELP_TAIL = " · F1 help"
SELECTION_HINT = " · s changes the selection"  # the first words to go when room is short


def fit_status(text: str, width: int) -> Text:
    """The status line in `width` cells: whole when it fits; else without the selection
    hint; else its longest part (a long reference config's name) cut in the middle; at
    worst its end cut with `…`. ` · F1 help` stays."""
    if len(text) <= width or width <= 0:
        return Text(text)
    tail = HELP_TAIL if text.endswith(HELP_TAIL) else ""
    body = text[:len(text) - len(tail)].removesuffix(SELECTION_HINT)
    room = width - len(tail)
    if room < 10:  # too narrow to say anything with the tail: the start, cut
        body, tail, room = text, "", width
    parts = body.split(" · ")
    excess = len(body) - room
    if excess > 0 and len(parts) > 1:
        k = max(range(len(parts) - 1), key=lambda j: len(parts[j]))  # the state stays whole
        parts[k] = cut_middle(parts[k], max(8, len(parts[k]) - excess))
        if len(" · ".join(parts)) <= room:  # else the end is what is too long: cut there
            body = " · ".join(parts)
    shown = Text(body)
    shown.truncate(room, overflow="ellipsis")
    return shown + Text(tail)


class StatusLine(Static):
    """The status line under the panes: `show` sets its text, fitted to its width now and
    again whenever the width changes."""

    def __init__(self, **kwargs):
        super().__init__("", **kwargs)
        self.text = ""

    def show(self, text: str) -> None:
        self.text = text
        self.update(fit_status(text, self.size.width or len(text)))

    def on_resize(self) -> None:
        self.update(fit_status(self.text, self.size.width or len(self.text)))


class FittingFooter(Footer):
    """Textual's Footer, less the keys that would be cut at its right edge (under the
    command palette's key). Measured once laid out, after each recompose (the bindings
    change with the focus and the screen) and each resize.

    Textual recomposes the footer (a widget per key, each styled anew) whenever the bindings
    may have changed: every focus move. Most moves keep the same keys (26 of 36 recomposes
    over the eight panes, scratch probe 2026-12-06), and the rebuild was ~15% of the app's
    CPU while switching panes: the keys on screen are kept when they would be the same."""

    _composed: tuple | None = None  # what the keys on screen were composed from

    def on_resize(self) -> None:
        if self._bindings_ready:
            self.call_after_refresh(self.fit_keys)

    async def recompose(self) -> None:
        shown = self._what_compose_shows()
        if shown != self._composed or not self.children:
            await super().recompose()
            self._composed = shown if self.is_attached else None
        self.fit_keys()  # before the next frame: no frame shows a key cut

    def _what_compose_shows(self) -> tuple | None:
        """Everything Footer.compose reads, compared by value."""
        if not self._bindings_ready or not self.is_attached:
            return None
        active = self.screen.active_bindings
        keys = tuple((binding, enabled, tooltip, self.app.get_key_display(binding))
                     for (_, binding, enabled, tooltip) in active.values() if binding.show)
        palette = active.get(self.app.COMMAND_PALETTE_BINDING)
        return (keys, palette and palette[1:], self.show_command_palette, self.compact,
                self.app.ENABLE_COMMAND_PALETTE)

    def fit_keys(self) -> None:
        """Hide the keys past the room the palette's key leaves, measured from their text
        (a footer under a modal screen recomposes without being laid out again)."""
        keys = [w for w in self.children if isinstance(w, FooterKey)]
        room = self.size.width - sum(_width(w) for w in keys if w.has_class("-command-palette"))
        used = 0
        for widget in keys:
            if widget.has_class("-command-palette"):
                continue
            used += _width(widget)
            widget.display = used <= room
            if not widget.display:
                room = -1  # once one is left out, so are those after it


def _width(widget: FooterKey) -> int:
    """The columns a footer key takes: its text, padding, border and margin."""
    return widget.render().cell_len + widget.styles.gutter.width + widget.styles.margin.width
