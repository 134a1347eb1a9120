"""Parsing generated answers (SPEC §3) and the early-stop predicate the runner uses.

The parser returns the *display position* (0..3) of the answer, or -1 (unparsed). Rules, in
order (docs/prompts.md has the full table with examples):

1. The first *answer label* in the output. A label candidate is one character of the
   config's label set (letters case-insensitively; digits exactly) standing alone: the
   character before it is not a letter or digit (nor a joiner such as "." "-" "'" "/" glued to
   one, so "U.S.A" and "X-ray" give nothing), and the character after it is not a letter or
   digit. A candidate is the answer when what follows it says so:
   - closing punctuation ("B.", "B)", "(B)", "**B**", "B:", "B,", "B\n", ...) -> yes; a joiner
     followed by a letter/digit ("B-cell", "D'Alembert", "A/C", and for digits "1.5",
     "3:15", "1,000") -> no;
   - the end of the output -> yes, except a lowercase "a" that is not in answer position;
   - spaces then a dash, colon, "(" or "=" ("B - Paris", "A (the first)") -> yes;
   - spaces then a word -> yes only if the word is a verb/conjunction that cannot follow
     the article ("A is correct", "B and C"), or the candidate is in answer position: right
     after an answer cue ("Answer:", "the answer is", "option", "I choose", ...) for
     uppercase letters and digits (the cue must lie within the 64 characters before it),
     or at the very start of the output for uppercase B-D.
     So "A cat ...", "Vitamin C deficiency" and "the answer is a decrease" give no label.
2. Failing that, an output that begins (after whitespace, markdown/quote wrappers and an
   optional "Answer:") with exactly one option's text selects it, compared case-insensitively,
   ignoring the option's final punctuation ("...shorter" matches "...shorter.") and ending at
   a word boundary; when one matching option's text is a prefix of another's, the longer
   match wins (the output contains it whole); two options with the same text give -1.
3. Otherwise -1.

`is_decided(partial)` is True when no continuation of `partial` can change `parse_answer`:
every candidate is classified from a bounded look-ahead, and a candidate whose look-ahead
runs past the end of `partial` is *pending*. The parse is decided once a candidate classified
as a label precedes every pending one. Without a label nothing is decided (a later label
would win over the option-text fallback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PARSER_VERSION = "1.0"

LETTER_LABELS = ("A", "B", "C", "D")
DIGIT_LABELS = ("1", "2", "3", "4")

# Words that, right after a candidate, show it is a label rather than the article "a" or a
# count ("A is correct", "B and C", "2 or 3" - but "A cat", "3 meters").
_FUNCTION_WORDS = frozenset({
    "is", "was", "and", "or", "nor", "but", "because", "since", "as", "seems", "appears",
    "would", "should", "could", "might", "must", "can", "will", "vs", "versus", "fits",
    "matches", "describes", "gives", "has", "being",
})
_LONGEST_FUNCTION_WORD = max(map(len, _FUNCTION_WORDS))

# Characters that glue a label to an adjacent word/number ("B-cell", "D'Alembert", "A/C").
_LETTER_JOINERS = frozenset("-'\u2019/")
_LOWERCASE_JOINERS = _LETTER_JOINERS | {"."}  # "a.m.", "a.k.a." (uppercase "B." is a label)
_DIGIT_JOINERS = frozenset("-'\u2019/.,:")
_LEFT_JOINERS = _LETTER_JOINERS | {"."}  # "U.S.A", "e.g.B": glued to the word before
_AFTER_SPACE_MARKERS = frozenset("-\u2013\u2014:(=")
_NEWLINES = frozenset("\n\r")

# Markdown/quote wrappers that may precede an answer ("**B**", "(B)", "> B", "\\boxed{B}").
_WRAPPERS = r"[\s*_\"'`(\[{>#\u201c\u2018]*"
_ANSWER_CUE = re.compile(
    r"(?:\b(?:answer|option|choice|letter|number)s?\b(?:\s+(?:is|would be|will be|should be|=))?"
    r"|\b(?:choose|chose|select|pick|go with|opt for)\b"
    r"|:)\s*[:=]?" + _WRAPPERS + r"$",
    re.IGNORECASE,
)
_CUE_WINDOW = 64  # a cue (with its wrappers) must lie within this many characters before the label
_ONLY_WRAPPERS = re.compile(_WRAPPERS + r"$")
_LEADING_NOISE = re.compile(_WRAPPERS + r"(?:answer\s*:" + _WRAPPERS + r")?", re.IGNORECASE)

LABEL, NOT_LABEL, PENDING = "label", "not a label", "pending"
_IN_WORD = "part of a word or number"


@dataclass(frozen=True)
class _Verdict:
    status: str  # LABEL | NOT_LABEL | PENDING
    why: str


def _is_word_char(ch: str) -> bool:
    return ch.isalnum()


def _label_index(ch: str, labels: tuple[str, ...]) -> int:
    """Position of `ch` in the label set (letters case-insensitively), or -1."""
    if ch in labels:
        return labels.index(ch)
    upper = ch.upper()
    if ch.isalpha() and len(upper) == 1 and upper in labels:
        return labels.index(upper)
    return -1


def _glued_on_left(text: str, i: int, joiners: frozenset[str]) -> bool:
    if i == 0:
        return False
    before = text[i - 1]
    if _is_word_char(before):
        return True
    return before in joiners and i >= 2 and _is_word_char(text[i - 2])


def _find_cue(prefix: str) -> re.Match | None:
    # Searching only the tail keeps long outputs linear; `pos` keeps \b honest at the cut.
    return _ANSWER_CUE.search(prefix, max(0, len(prefix) - _CUE_WINDOW))


def _answer_position(prefix: str, ch: str) -> str | None:
    """Why the candidate right after `prefix` sits where an answer goes, or None."""
    if _ONLY_WRAPPERS.match(prefix) and ch in "BCD":
        return "at the start of the output"
    if ch.islower():
        return None
    cue = _find_cue(prefix)
    return f"after the answer cue {cue.group(0).strip()!r}" if cue else None


def _classify_at_end(prefix: str, ch: str) -> _Verdict:
    if ch == "a" and not (_ONLY_WRAPPERS.match(prefix) or _find_cue(prefix)):
        return _Verdict(NOT_LABEL, "a lowercase 'a' at the end, not in answer position")
    return _Verdict(LABEL, "at the end of the output")


def _classify_before_word(text: str, start: int, prefix: str, ch: str, final: bool) -> _Verdict:
    """The candidate is followed by spaces and then a letter/digit at `start`."""
    position = _answer_position(prefix, ch)
    if position:
        return _Verdict(LABEL, f"followed by text, {position}")
    end = start
    while end < len(text) and _is_word_char(text[end]):
        end += 1
    word = text[start:end].lower()
    if end == len(text) and not final:
        # The word may still grow; wait only if it can still become a function word.
        if len(word) <= _LONGEST_FUNCTION_WORD and any(w.startswith(word) for w in _FUNCTION_WORDS):
            return _Verdict(PENDING, "followed by an unfinished word")
    if word in _FUNCTION_WORDS:
        return _Verdict(LABEL, f"followed by {word!r}")
    return _Verdict(NOT_LABEL, f"followed by the word {word!r} (read as ordinary text)")


def _classify_after_spaces(text: str, j: int, prefix: str, ch: str, final: bool) -> _Verdict:
    """The candidate is followed by whitespace starting at `j`."""
    k = j
    while k < len(text) and text[k].isspace():
        if text[k] in _NEWLINES:
            return _Verdict(LABEL, "followed by a line break")
        k += 1
    position = _answer_position(prefix, ch)
    if k == len(text):
        if final:
            return _classify_at_end(prefix, ch)
        # In answer position every continuation makes it a label: decide now.
        return _Verdict(LABEL, position) if position else _Verdict(PENDING, "followed by spaces")
    nxt = text[k]
    if nxt in _AFTER_SPACE_MARKERS:
        return _Verdict(LABEL, f"followed by {nxt!r}")
    if _is_word_char(nxt):
        return _classify_before_word(text, k, prefix, ch, final)
    if position:
        return _Verdict(LABEL, f"followed by {nxt!r}, {position}")
    return _Verdict(NOT_LABEL, f"followed by {nxt!r} (read as ordinary text)")


def _classify(text: str, i: int, final: bool) -> _Verdict:
    """Classify the label candidate at text[i]; its left context is text[:i]."""
    ch = text[i]
    digit = ch.isdigit()
    joiners = _DIGIT_JOINERS if digit else _LOWERCASE_JOINERS if ch.islower() else _LETTER_JOINERS
    if _glued_on_left(text, i, _DIGIT_JOINERS if digit else _LEFT_JOINERS):
        return _Verdict(NOT_LABEL, _IN_WORD)
    prefix = text[:i]
    j = i + 1
    if j == len(text):
        return _classify_at_end(prefix, ch) if final else _Verdict(PENDING, "last character so far")
    nxt = text[j]
    if _is_word_char(nxt):
        return _Verdict(NOT_LABEL, _IN_WORD)
    if nxt.isspace():
        return _classify_after_spaces(text, j, prefix, ch, final)
    if nxt in joiners:
        if j + 1 == len(text):
            return _classify_at_end(prefix, ch) if final else _Verdict(PENDING, f"followed by {nxt!r}")
        if _is_word_char(text[j + 1]):
            return _Verdict(NOT_LABEL, f"joined by {nxt!r} to the next word")
    return _Verdict(LABEL, f"followed by {nxt!r}")


@dataclass(frozen=True)
class _Scan:
    position: int  # display position of the first label, -1 if none
    decided: bool  # no continuation can change the label outcome
    reason: str


def _scan(text: str, labels: tuple[str, ...], final: bool) -> _Scan:
    rejected: list[str] = []
    for i, ch in enumerate(text):
        position = _label_index(ch, labels)
        if position < 0:
            continue
        verdict = _classify(text, i, final)
        if verdict.status == PENDING:
            return _Scan(-1, False, f"{ch!r} at char {i} is pending ({verdict.why})")
        if verdict.status == LABEL:
            skipped = f"; skipped {', '.join(rejected)}" if rejected else ""
            return _Scan(position, True, f"label {ch!r} at char {i}, {verdict.why}{skipped}")
        if verdict.why != _IN_WORD:  # letters inside words are not worth reporting
            rejected.append(f"{ch!r} at char {i} ({verdict.why})")
    skipped = f" (skipped {', '.join(rejected)})" if rejected else ""
    return _Scan(-1, False, f"no answer label in {'/'.join(labels)}{skipped}")


_OPTION_END_PUNCTUATION = ".!?;,: \t\n"  # "...shorter" matches the option "...shorter."


def _fold(text: str) -> str:
    return text.casefold()


def _option_at_start(output: str, labels: tuple[str, ...], options: tuple[str, ...]) -> tuple[int, str]:
    """(display position, reason) of the one option whose text starts the output, or -1."""
    head = _fold(output[_LEADING_NOISE.match(output).end():])
    matches: list[tuple[int, int]] = []  # (length, position)
    for position, option in enumerate(options):
        needle = _fold(option.strip().rstrip(_OPTION_END_PUNCTUATION))
        if not needle or not head.startswith(needle):
            continue
        boundary = len(head) == len(needle) or not (
            _is_word_char(needle[-1]) and _is_word_char(head[len(needle)]))
        if boundary:
            matches.append((len(needle), position))
    if not matches:
        return -1, "the output does not begin with any option's text"
    longest = max(length for length, _ in matches)
    best = [position for length, position in matches if length == longest]
    if len(best) > 1:
        shown = ", ".join(labels[p] for p in best)
        return -1, f"the output begins with the text of several options ({shown})"
    return best[0], f"the output begins with the text of option {labels[best[0]]}"


def parse_answer(output: str, labels: tuple[str, ...], options: tuple[str, ...]) -> int:
    """Display position 0..len(labels)-1 of the answer in `output`, or -1 (unparsed)."""
    return _parse(output, labels, options)[0]


def _parse(output: str, labels: tuple[str, ...], options: tuple[str, ...]) -> tuple[int, str]:
    scan = _scan(output, labels, final=True)
    if scan.position >= 0:
        return scan.position, f"rule 1: {scan.reason}"
    position, why = _option_at_start(output, labels, options)
    if position >= 0:
        return position, f"rule 2: {scan.reason}; {why}"
    return -1, f"unparsed: {scan.reason}; {why}"


def is_decided(partial: str, labels: tuple[str, ...], options: tuple[str, ...]) -> bool:
    """True when no continuation of `partial` can change `parse_answer`'s result (sound)."""
    return _scan(partial, labels, final=False).decided


def explain(output: str, labels: tuple[str, ...], options: tuple[str, ...]) -> str:
    """Which rule fired and why, for the TUI drill-down."""
    position, why = _parse(output, labels, options)
    result = f"-> {labels[position]} (display position {position})" if position >= 0 else "-> -1"
    return f"{why} {result}"
