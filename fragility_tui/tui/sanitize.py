"""Untrusted text as markup-free Rich `Text` for the app's widgets; the sanitising itself
is fragility_tui.text.clean (one owner for the app, the report and the CLI)."""

from __future__ import annotations

from rich.text import Text

from fragility_tui.text import DEFAULT_LIMIT, clean

__all__ = ["DEFAULT_LIMIT", "block", "cell", "clean"]


def cell(value: object, width: int = 60) -> Text:
    """A table cell: one line, cut to `width` characters, as a markup-free Text."""
    text = clean(value, limit=max(width * 4, 200), one_line=True)
    if len(text) > width:
        text = text[: width - 1] + "…"
    return Text(text)


def block(value: object, *, limit: int = DEFAULT_LIMIT, style: str = "") -> Text:
    """A multi-line block of untrusted text as a markup-free Text."""
    return Text(clean(value, limit=limit), style=style)
