"""How every output writes an interval: `[-0.29, -0.11]`, brackets and a comma, so that a
negative bound never reads as a dash of a range ("-0.29–-0.11" was hard to read, issue 44).
Plain text output (report, calibrate, Markdown) writes the ASCII minus, like every other
number there, so that grep finds it (a row mixed `-0.4 [−6.0, 4.9]`, issue 60); the app's
panes write the true minus sign (U+2212) they use throughout. JSON keeps numbers."""

from __future__ import annotations

MINUS = "\u2212"


ASCII_MINUS = "-"


def signed(x: float, digits: int = 1, minus: str = MINUS) -> str:
    """A number with `digits` decimals and `minus` as its sign ('−0.29'); '-0.0' is '0.0'."""
    text = f"{x:.{digits}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text.replace("-", minus)


def interval(low: float, high: float, digits: int = 1, minus: str = MINUS) -> str:
    """'[−0.29, −0.11]' (the panes), '[-0.29, -0.11]' with minus=ASCII_MINUS (text output)."""
    return f"[{signed(low, digits, minus)}, {signed(high, digits, minus)}]"
