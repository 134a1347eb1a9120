"""How every text output writes an interval: `[−0.29, −0.11]`, brackets, a comma, and a
true minus sign (U+2212), so that a negative bound never reads as a dash of a range
("-0.29–-0.11" was hard to read, issue 44). JSON keeps numbers."""

from __future__ import annotations

MINUS = "\u2212"


def signed(x: float, digits: int = 1) -> str:
    """A number with `digits` decimals and a true minus sign ('−0.29'); '-0.0' is '0.0'."""
    text = f"{x:.{digits}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text.replace("-", MINUS)


def interval(low: float, high: float, digits: int = 1) -> str:
    """'[−0.29, −0.11]'."""
    return f"[{signed(low, digits)}, {signed(high, digits)}]"
