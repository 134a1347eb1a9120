"""The one sanitiser every piece of grid text passes through before it is shown."""

from __future__ import annotations

from rich.text import Text

from fragility_tui.tui.sanitize import block, cell, clean

HOSTILE = ("[bold]x[/] [link=https://evil]y[/link] \x1b[31mred\x1b[0m "
           "\x1b]8;;https://evil\x07osc\x1b]8;;\x07 \u202eevil\u202c \x00nul \x9bcsi\x07bel")


def test_markup_stays_literal():
    text = block("[bold]x[/] [link=x]y")
    assert isinstance(text, Text)
    assert text.plain == "[bold]x[/] [link=x]y"
    assert not text.spans  # nothing was parsed into a style


def test_escapes_and_controls_become_visible():
    out = clean(HOSTILE)
    assert "\x1b" not in out and "\x07" not in out and "\x00" not in out and "\x9b" not in out
    assert "␛[31mred␛[0m" in out
    assert "␀nul" in out
    assert "<U+009B>csi" in out
    assert "␇" in out


def test_bidi_overrides_are_tagged_not_obeyed():
    out = clean("abc\u202edef\u2066g\u200fh")
    assert out == "abc<U+202E>def<U+2066>g<U+200F>h"


def test_newlines_kept_in_blocks_and_marked_in_cells():
    assert clean("a\nb\r\nc") == "a\nb\nc"
    assert clean("a\nb\tc", one_line=True) == "a⏎b c"
    assert cell("a\nb").plain == "a⏎b"


def test_huge_text_is_cut_with_a_note():
    out = clean("x" * 1_000_000, limit=1000)
    assert out.startswith("x" * 1000)
    assert "999,000 more characters not shown" in out
    assert len(out) < 1100


def test_cell_is_cut_to_width():
    assert cell("abcdefghij", width=5).plain == "abcd…"


def test_none_and_numbers():
    assert clean(None) == ""
    assert clean(3.5) == "3.5"


def test_a_markdown_table_export_carries_no_control_character(tmp_path):
    """Issue 57 item 1: a model name from the store, exported as Markdown and printed with
    cat, must not retitle or clear the terminal."""
    import re

    from fragility_tui.tui.widgets import export_table

    path = export_table(["model", "acc"], [["m\x1b]0;owned\x07\x1b[2J\u202eevil", 0.5]],
                        tmp_path / "t.md")
    text = path.read_text()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text), repr(text)
    assert "evil" in text and "0.5" in text
