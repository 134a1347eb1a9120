"""fragility_tui.text.redact_secret: no piece of an API key of 8 characters or more survives,
wherever it sits in the text and whatever is cut afterwards (issue 47, item 2)."""

from __future__ import annotations

import time

from fragility_tui.text import SECRET_MARK, redact_secret

KEY = "sk-live-0123456789abcdefghijXYZ"  # 30 characters


def test_the_whole_key_and_its_pieces_are_removed():
    assert redact_secret(f"Authorization: Bearer {KEY}.", KEY) == \
        f"Authorization: Bearer {SECRET_MARK}."
    head, tail = KEY[:18], KEY[-12:]  # what a cut before or after redaction would leave
    assert KEY[:18] not in redact_secret(f"x {head}", KEY)
    assert redact_secret(f"{tail} y", KEY) == f"{SECRET_MARK} y"
    assert redact_secret(f"{KEY}{KEY}", KEY) == SECRET_MARK  # adjacent copies: one run
    assert redact_secret(f"a {KEY} b {KEY[5:15]} c", KEY) == f"a {SECRET_MARK} b {SECRET_MARK} c"


def test_a_cut_after_redaction_leaves_no_piece():
    """The 401 of the issue: the key quoted after 271 characters, the message cut at 300."""
    message = "x" * 271 + KEY + " more"
    shown = redact_secret(message, KEY)[:300]
    assert not any(KEY[i:i + 8] in shown for i in range(len(KEY) - 7))


def test_short_pieces_and_other_text_stay():
    assert redact_secret(f"{KEY[:7]} {KEY[-7:]}", KEY) == f"{KEY[:7]} {KEY[-7:]}"
    assert redact_secret("nothing secret", KEY) == "nothing secret"
    assert redact_secret("text", None) == "text"
    assert redact_secret("a short key: abc", "abc") == f"a short key: {SECRET_MARK}"


def test_linear_in_the_text():
    text = ("y" * 1000 + KEY[3:20]) * 1000  # 1 MB with a thousand pieces
    t0 = time.perf_counter()
    out = redact_secret(text, KEY)
    assert time.perf_counter() - t0 < 5
    assert out.count(SECRET_MARK) == 1000 and KEY[3:11] not in out
