"""The answer parser (SPEC §3) and its early-stop predicate."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fragility_tui.harness.parser import (
    DIGIT_LABELS, LETTER_LABELS, PARSER_VERSION, explain, is_decided, parse_answer,
)

# Display-order options of a real ARC-Challenge item (Mercury_7175875).
OPTIONS = ("Planetary density will decrease.", "Planetary years will become longer.",
           "Planetary days will become shorter.", "Planetary gravity will become stronger.")
L, D = LETTER_LABELS, DIGIT_LABELS

CASES = [
    # bare labels and wrappers
    ("B", L, 1),
    (" B", L, 1),
    ("B.", L, 1),
    ("B)", L, 1),
    ("(B)", L, 1),
    ("**B**", L, 1),
    ("`C`", L, 2),
    ("[D]", L, 3),
    ("\\boxed{C}", L, 2),
    ("Answer: B", L, 1),
    ("Answer: (C)", L, 2),
    ("**Answer:** D", L, 3),
    ("## Answer\nB", L, 1),
    ("The answer is B", L, 1),
    ("The answer is B.", L, 1),
    ("C\nD", L, 2),
    # lowercase when unambiguous
    ("b", L, 1),
    ("(c)", L, 2),
    ("answer: d", L, 3),
    ("the answer is b because days get shorter", L, 1),
    ("a", L, 0),
    # chatty preambles and explanations
    ("Sure! The correct answer is C.", L, 2),
    ("The correct answer is **A. Planetary density will decrease.**", L, 0),
    ("I think it is D.", L, 3),
    ("I'd say D", L, 3),
    ("Option B is the best fit.", L, 1),
    ("The answer is A because the days get shorter.", L, 0),
    ("B because faster rotation shortens the day", L, 1),
    ("C. Planetary days will become shorter.", L, 2),
    ("C) Planetary days will become shorter.", L, 2),
    ("**C**: Planetary days", L, 2),
    ("A - Planetary density will decrease.", L, 0),
    ("A is correct.", L, 0),
    # two labels: the first one counts
    ("A and B", L, 0),
    ("B or C", L, 1),
    ("A, C", L, 0),
    ("AB", L, -1),
    # the article "a"/"A" and words are not labels
    ("A cat would not notice the change.", L, -1),
    ("The answer is a decrease in density.", L, -1),
    ("It's a", L, -1),
    ("Vitamin C deficiency", L, -1),
    ("B-cell", L, -1),
    ("U.S.A.", L, -1),
    ("at 9 a.m. sharp", L, -1),
    ("E", L, -1),
    ("Answer: 2", L, -1),
    # echoing an option's text
    ("Planetary days will become shorter.", L, 2),
    ("planetary days will become shorter", L, 2),
    ("Answer: Planetary years will become longer.", L, 1),
    ("**Planetary gravity will become stronger.**", L, 3),
    ("Planetary", L, -1),
    ("Planetary days will become shorterly", L, -1),
    # refusals and empty output
    ("I cannot answer that question.", L, -1),
    ("I'm sorry, but I can't help with that.", L, -1),
    ("", L, -1),
    ("   \n", L, -1),
    # digits for the digit format
    ("2", D, 1),
    ("2.", D, 1),
    ("(3)", D, 2),
    ("Answer: 4", D, 3),
    ("The answer is 1.", D, 0),
    ("3. Planetary days will become shorter.", D, 2),
    ("Option 2", D, 1),
    ("B", D, -1),
    ("1.5", D, -1),
    ("There are 3 correct options", D, -1),
    ("12", D, -1),
    ("Planetary years will become longer.", D, 1),
]


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(("output", "labels", "expected"), CASES)
def test_parse_answer(output: str, labels: tuple[str, ...], expected: int) -> None:
    assert parse_answer(output, labels, OPTIONS) == expected, explain(output, labels, OPTIONS)


@pytest.mark.parametrize(("output", "labels", "expected"), CASES)
def test_decided_prefixes_agree_with_the_full_output(output, labels, expected) -> None:
    for end in range(len(output) + 1):
        partial = output[:end]
        if is_decided(partial, labels, OPTIONS):
            assert parse_answer(partial, labels, OPTIONS) == expected, repr(partial)


def test_option_text_must_be_unique() -> None:
    duplicated = ("Paris", "London", "Paris", "Rome")
    assert parse_answer("Paris", L, duplicated) == -1
    nested = ("Yes", "Yes, always", "No", "Never")
    assert parse_answer("Yes, always.", L, nested) == 1
    assert parse_answer("Yes.", L, nested) == 0
    assert parse_answer("42 m", L, ("4", "42", "7", "9")) == 1
    assert parse_answer("42 m", L, ("4", "7", "9", "11")) == -1  # boundary: "4" is not "42"
    # the "4" of "42" is no digit label; the echo selects the option "42 m"
    assert parse_answer("42 m", D, ("4", "42 m", "7", "9")) == 1
    assert parse_answer("Answer: 42 m", L, ("4", "42 m", "7", "9")) == 1


DECIDED = [
    ("", L, False),
    ("B", L, False),  # may become "Because"
    (" B", L, False),
    ("B.", L, True),
    ("B)", L, True),
    ("(B", L, False),
    ("(B)", L, True),
    ("**B", L, False),
    ("**B*", L, True),
    ("B\n", L, True),
    ("B ", L, True),  # B-D at the start: any continuation keeps it a label
    ("Answer: B", L, False),
    ("Answer: B ", L, True),
    ("The answer is C", L, False),
    ("The answer is C.", L, True),
    ("A", L, False),
    ("A ", L, False),  # "A cat" or "A is"?
    ("A ca", L, False),  # may become "A can"
    ("A cat", L, False),  # no label so far; one may still come
    ("A is", L, False),  # may become "A island"
    ("A is ", L, True),
    ("b", L, False),
    ("b.", L, False),  # may become "b.c."
    ("b. ", L, True),
    ("Planetary days will become shorter.", L, False),
    ("I cannot answer", L, False),
    ("2", D, False),
    ("2.", D, False),  # may become "2.5"
    ("2. ", D, True),
    ("2.5", D, False),
    ("(3)", D, True),
]


@pytest.mark.parametrize(("partial", "labels", "expected"), DECIDED)
def test_is_decided_table(partial: str, labels: tuple[str, ...], expected: bool) -> None:
    assert is_decided(partial, labels, OPTIONS) is expected


FRAGMENTS = [
    "A", "B", "C", "D", "a", "b", "c", "d", "1", "2", "3", "4", "E", "I", " ", "  ", "\n", "\t",
    ".", ")", "(", "*", "**", ":", "-", "'", "/", ",", "!", "?", "\"", "`", "{", "}", "_", "5",
    "Answer:", "answer", "The answer is ", "option ", "is", "is ", "and", "can", "cat", "Because",
    " because", "\\boxed{", "U.S.", "a.m.", "é", "\u2014", "I'd", "Sure! ", *OPTIONS, "Planetary ",
    # pieces that decide the parse, so that many drawn prefixes are decided
    "B.", "(C)", "A is ", "2. ", "(4)", "Answer: D ", "b. ", "**A**",
]
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=8).map("".join)


@settings(max_examples=600, deadline=None)
@given(partial=texts, suffix=texts, digits=st.booleans())
def test_is_decided_is_sound(partial: str, suffix: str, digits: bool) -> None:
    labels = D if digits else L
    if is_decided(partial, labels, OPTIONS):
        assert parse_answer(partial + suffix, labels, OPTIONS) == parse_answer(partial, labels, OPTIONS)


@settings(max_examples=300, deadline=None)
@given(output=texts, digits=st.booleans())
def test_parse_is_total_and_explained(output: str, digits: bool) -> None:
    labels = D if digits else L
    position = parse_answer(output, labels, OPTIONS)
    assert -1 <= position < len(labels)
    assert explain(output, labels, OPTIONS).endswith(
        f"-> {labels[position]} (display position {position})" if position >= 0 else "-> -1")


def test_explain_names_the_rule() -> None:
    assert explain("The answer is C.", L, OPTIONS).startswith("rule 1: label 'C'")
    assert "rule 2" in explain("Planetary days will become shorter.", L, OPTIONS)
    cat = explain("A cat", L, OPTIONS)
    assert cat.startswith("unparsed") and "'cat'" in cat


def test_parser_version_is_recorded() -> None:
    assert PARSER_VERSION == "1.0"
