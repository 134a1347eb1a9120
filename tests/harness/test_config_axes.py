"""SPEC v5 §2b: config ids, their axes, the canonical order, §7's neighbourhoods by axes."""

from __future__ import annotations

import random
import re

import pytest

from fragility_tui.harness.config_axes import (LIK_IDS, PAPER_IDS, axis_neighbourhood,
                                               canonical_order, config_id_problem,
                                               derived_axes, imported_config_id, merge_axes)
from fragility_tui.harness.configs import CONFIG_IDS, default_reference


def test_paper_set_axes_and_order_are_v4s():
    assert PAPER_IDS == CONFIG_IDS
    assert derived_axes("o3.paren") == {"order": "o3", "format": "paren", "scoring": "generate",
                                        "harness": "fragility-tui", "bos": "default",
                                        "template": "default", "shots": "0"}
    assert derived_axes("cloze_bare") == {"scoring": "likelihood", "stem": "bare",
                                          "harness": "fragility-tui", "bos": "default",
                                          "template": "default", "shots": "0"}
    shuffled = list(CONFIG_IDS)
    random.Random(1).shuffle(shuffled)
    assert canonical_order(shuffled) == list(CONFIG_IDS)


def test_extension_and_imported_ids_sort_after_the_paper_set():
    ids = ["lm-eval:arc:acc_norm+k5", "inspect:arc:choice", "o0.letter+nobos", "zzz",
           "o0.letter.lik", "o2.digit.lik+raw+k5", "cloze_qa", "o0.letter+k5",
           "lm-eval:arc:acc_norm", "lm-eval:arc:acc_norm+k25", "o0.letter", "o0.letter+bos"]
    assert canonical_order(ids) == [
        "o0.letter", "cloze_qa", "o0.letter+k5", "o0.letter+bos", "o0.letter+nobos",
        "o0.letter.lik", "o2.digit.lik+raw+k5", "inspect:arc:choice", "lm-eval:arc:acc_norm",
        "lm-eval:arc:acc_norm+k5", "lm-eval:arc:acc_norm+k25", "zzz"]
    assert len(LIK_IDS) == 18
    assert derived_axes("o2.digit.lik+raw+k5") == {
        "order": "o2", "format": "digit", "scoring": "letter_lik", "harness": "fragility-tui",
        "bos": "default", "template": "raw", "shots": "5"}
    assert derived_axes("lm-eval:arc:acc+k5") == {"harness": "lm-eval", "task": "arc",
                                                  "metric": "acc", "shots": "5"}
    assert derived_axes("lm-eval:arc:acc")["shots"] == "unknown"
    assert derived_axes("my own config") == {}
    assert merge_axes("lm-eval:arc:acc", {"scoring": "likelihood", "shots": 0}) == {
        "harness": "lm-eval", "task": "arc", "metric": "acc", "shots": "0",
        "scoring": "likelihood"}


def test_reference_defaults_to_o0_letter_else_the_first_in_canonical_order():
    assert default_reference(["cloze_qa", "o1.letter", "o0.letter"]) == "o0.letter"
    assert default_reference(["inspect:t:choice", "cloze_bare"]) == "cloze_bare"
    assert default_reference(["zzz", "lm-eval:t:acc"]) == "lm-eval:t:acc"
    assert default_reference([]) is None


def test_imported_ids_are_made_safe():
    assert imported_config_id("lm-eval", "arc easy", "acc:norm", 5) == "lm-eval:arc_easy:acc_norm+k5"
    assert imported_config_id("inspect", "t", "choice", None) == "inspect:t:choice"


@pytest.mark.parametrize("bad, why", [
    ("", "empty"), (" x", "surrounding spaces"), ("a\x1b[2Jb", "control characters"),
    ("x" * 201, "at most 200"), ("o9.letter", "reads as one of our runner's ids"),
    ("o0.letter+k", "reads as one"), ("cloze_qna", "reads as one"),
    ("o0.letter+k5+bos", "reads as one")])
def test_bad_config_ids_say_why(bad, why):
    assert why in config_id_problem(bad)


def test_neighbourhoods_by_axes_and_unknown_levels():
    ref = derived_axes("o0.letter")
    assert axis_neighbourhood("bos", ref, derived_axes("o0.letter+nobos"))
    assert not axis_neighbourhood("bos", ref, derived_axes("o1.letter+nobos"))
    assert axis_neighbourhood("scoring", ref, derived_axes("o0.letter.lik"))
    assert axis_neighbourhood("shots", ref, derived_axes("o0.letter+k5"))
    # an axis a config lacks or states as unknown agrees with any level
    assert axis_neighbourhood("harness", {"harness": "a", "shots": "0"},
                              {"harness": "b", "shots": "unknown"})


def test_axis_levels_may_look_like_our_ids():
    from fragility_tui.harness.config_axes import axis_levels_problem

    assert axis_levels_problem("mine", {"order": "o0", "stem": "cloze_x", "shots": 5}) is None
    assert "has level" in axis_levels_problem("mine", {"order": "o0\x1b[2J"})
    assert "must be lower-case" in axis_levels_problem("mine", {"Order": "o0"})


# -- choosing runner configs (issue 56: `run --configs`) ---------------------------------


def test_config_groups_and_modifiers_expand_in_canonical_order():
    from fragility_tui.harness.configs import CONFIG_IDS, parse_config_list

    assert parse_config_list("paper") == parse_config_list(None) == list(CONFIG_IDS)
    assert parse_config_list("lik") == list(LIK_IDS)
    both = parse_config_list("lik,paper")
    assert both[:26] == list(CONFIG_IDS) and both[26:] == list(LIK_IDS)
    assert parse_config_list("o0.letter+nobos,o0.letter") == ["o0.letter", "o0.letter+nobos"]
    assert parse_config_list("paper+nobos") == [f"{c}+nobos" for c in CONFIG_IDS]
    assert parse_config_list("o3+bos") == [f"o3.{f}+bos" for f in
                                           ("letter", "paren", "digit", "instruct")]
    assert parse_config_list("o2.digit.lik+raw+k5") == ["o2.digit.lik+raw+k5"]


@pytest.mark.parametrize("text, says", [
    ("paper+k5+nobos", "modifiers go in this order: +bos|+nobos, +raw|+chat, +kN"),
    ("cloze_qa+chat", "does not apply to a cloze config"),
    ("o0.instruct.lik", "unknown config"),  # no .lik of the instruct format
    ("o6.letter", "unknown config"),
])
def test_a_config_that_cannot_run_is_named(text, says):
    from fragility_tui.harness.configs import parse_config_list

    with pytest.raises(ValueError, match=re.escape(says)):
        parse_config_list(text)


def test_an_extension_config_states_its_parts():
    from fragility_tui.harness.configs import get_config

    config = get_config("o2.digit.lik+raw+k5")
    assert (config.order, config.format, config.scoring, config.bos, config.template,
            config.shots, config.base_id) == ("o2", "digit", "letter_lik", None, "raw", 5,
                                              "o2.digit.lik")
    assert get_config("cloze_bare+nobos").scores_options
    assert get_config("o0.letter").bos is None and not get_config("o0.letter").scores_options
