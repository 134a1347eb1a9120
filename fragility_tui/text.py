"""The one sanitiser for untrusted text (item text, model output, names, errors), shared by
the app, the report and the CLI.

Grid text is untrusted: it may hold Rich markup (`[bold]`, `[link=x]`), terminal escape
sequences (CSI, OSC), bidi overrides that reorder what the eye reads, NUL and other control
characters, or megabytes of text. `clean()` returns a plain `str` in which every control
character is a visible stand-in, bidi controls are `<U+202E>`-style tags, and long text is
cut with a note saying how much was dropped. It is safe to print, and safe to wrap in
`rich.text.Text` / `Content` / `Static(markup=False)`; never pass it through markup parsing.
"""

from __future__ import annotations

import json
import re

DEFAULT_LIMIT = 20_000  # characters shown of one value; the rest is summarised

# C0 controls (except newline and tab, handled per mode), DEL, and C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
# Bidi embeddings/overrides/isolates and marks, plus other invisible format characters.
_INVISIBLE = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u061c]")


def _visible_control(match: re.Match) -> str:
    code = ord(match.group())
    if code == 0x1B:
        return "␛"
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ ␁ ... ␟
    if code == 0x7F:
        return "␡"
    return f"<U+{code:04X}>"


def _visible_format(match: re.Match) -> str:
    return f"<U+{ord(match.group()):04X}>"


def clean(value: object, *, limit: int = DEFAULT_LIMIT, one_line: bool = False) -> str:
    """Untrusted value -> plain text with nothing hidden and nothing a terminal obeys.

    one_line: newlines become '⏎' and tabs a space (for table cells and titles).
    """
    text = "" if value is None else str(value)
    dropped = 0
    if len(text) > limit:
        dropped = len(text) - limit
        text = text[:limit]
    text = _CONTROL.sub(_visible_control, text.replace("\r\n", "\n"))
    text = _INVISIBLE.sub(_visible_format, text)
    if one_line:
        text = text.replace("\n", "⏎").replace("\t", " ")
    else:
        text = text.replace("\t", "    ")
    if dropped:
        text += f" … [{dropped:,} more characters not shown]"
    return text


def cut_middle(text: str, width: int) -> str:
    """`text` in at most `width` characters; a cut keeps the start and the end (where names
    differ: ...-instruct+int4 vs ...-instruct+int8) with an ellipsis between."""
    if len(text) <= width:
        return text
    if width < 2:
        return text[:width]
    tail = (width - 1) // 2
    return text[:width - 1 - tail] + "…" + (text[-tail:] if tail else "")


def distinct_labels(names: list[str], width: int) -> list[str]:
    """The names cut to `width` (cut_middle), or as little wider as keeps every two
    different names apart on screen: a cut never makes two models look like one."""
    distinct = len(set(names))
    longest = max((len(n) for n in names), default=0)
    for w in range(max(2, width), longest + 1):
        labels = [cut_middle(n, w) for n in names]
        if len(set(labels)) == distinct:
            return labels
    return list(names)


def md_cell(value: object) -> str:
    """A value as one Markdown table cell: None empty, a list as JSON, backslashes and pipes
    escaped (a pipe would start a new column), line breaks as <br> (a newline would end the
    row). Not a sanitiser: what the cell shows is still the caller's to clean()."""
    if value is None:
        return ""
    text = json.dumps(value) if isinstance(value, list) else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


SECRET_FRAGMENT = 8  # characters: a piece of a key this long or longer is removed
SECRET_MARK = "[api key]"


def redact_secret(text: str, secret: str | None, *, fragment: int = SECRET_FRAGMENT) -> str:
    """`text` with every piece of `secret` at least `fragment` characters long replaced by
    "[api key]" (a key shorter than that: the whole key where it stands as a token, not
    inside a word). Applied before any cut, so a key
    that a cut would have split is gone whole; a piece of it is gone too, where a server
    quoted only part of it. Linear in the text: each `fragment`-long window is looked up
    among the key's windows, and runs of matching windows are replaced together."""
    if not secret or not text:
        return text
    if len(secret) < fragment:  # a short key only as a whole token: "B" is not in "Bob"
        return re.sub(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", SECRET_MARK,
                      text)
    windows = {secret[i:i + fragment] for i in range(len(secret) - fragment + 1)}
    out, start = [], None  # start: where the current run of key windows began
    end = -1  # how far the current run reaches
    for i in range(len(text) - fragment + 1):
        if text[i:i + fragment] in windows:
            if start is None or i > end:
                if start is not None:
                    out.append((start, end))
                start = i
            end = i + fragment
    if start is not None:
        out.append((start, end))
    if not out:
        return text
    pieces, at = [], 0
    for a, b in out:
        pieces += [text[at:a], SECRET_MARK]
        at = b
    pieces.append(text[at:])
    return "".join(pieces)


def visible_text(text: str) -> str:
    """A document (a Markdown export) with its lines kept and every other control and
    invisible format character made a visible stand-in, as clean() does, with no cut: a
    terminal that prints the file obeys none of them."""
    text = _CONTROL.sub(lambda m: m.group() if m.group() == "\n" else _visible_control(m),
                        text.replace("\r\n", "\n"))
    return _INVISIBLE.sub(_visible_format, text)


def finite(value):
    """A JSON-bound value with every NaN and ±Infinity made None (null): Python's json
    writes them as bare NaN / Infinity, which is not JSON, and a store or a parts folder
    may hold them (a hand-edited run record, a server's answer)."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


CELL_TEXT_CAP = 4096  # characters of a raw output or a log's prompt a cell keeps


def capped(text: str | None) -> str | None:
    """What a cell keeps of a long text (a served answer, an imported log's prompt or
    answer): at most CELL_TEXT_CAP characters, then how long it was (megabytes from a server
    or a log must not grow the store by megabytes a cell)."""
    if text is None or len(text) <= CELL_TEXT_CAP:
        return text
    return f"{text[:CELL_TEXT_CAP]} … [{len(text):,} characters in all; the rest not kept]"
