"""Rendering of the 26 configs: every prompt of one item shown and checked (SPEC §2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fragility_tui.harness.configs import CONFIG_IDS, IDENTITY, get_config, item_shuffles
from fragility_tui.items.item import Item
from fragility_tui.harness.parser import DIGIT_LABELS, LETTER_LABELS, parse_answer
from fragility_tui.harness.render import (
    ANSWER_CUE, INSTRUCTION, ClozePrompt, GenerationPrompt, render, render_all, shared_prefix,
)

REPO = Path(__file__).resolve().parents[2]
SEED = 0

# Built in so the test always runs; the stem's outer whitespace and inner newline are
# deliberate (MMLU has both).
BUILTIN = Item(
    item_uid="builtin/boiling-1",
    benchmark="builtin",
    subject=None,
    question="At sea level, water boils at which temperature?\n(Assume pure water.) \n",
    choices=("50 °C", " 100 °C", "150 °C", "212 K"),
    gold=1,
)

BUILTIN_O0_LETTER = (
    "Question: At sea level, water boils at which temperature?\n(Assume pure water.)\n"
    "A. 50 °C\n"
    "B. 100 °C\n"
    "C. 150 °C\n"
    "D. 212 K\n"
    "Answer:"
)


def _item(row: dict) -> Item:
    return Item(f"{row['benchmark']}/{row['id']}", row["benchmark"], row["subject"],
                row["question"], tuple(row["choices"]), row["gold"])


def _four_option_items(path: Path, limit: int) -> list[Item]:
    items = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if len(row["choices"]) == 4:
                items.append(_item(row))
            if len(items) == limit:
                break
    return items


@pytest.fixture(params=["builtin", "arc_challenge"])
def item(request) -> Item:
    if request.param == "builtin":
        return BUILTIN
    # `shared_benchmarks` (tests/conftest.py) skips when ../shared is absent, fails under CI
    shared = request.getfixturevalue("shared_benchmarks")
    return _four_option_items(shared / "arc_challenge_test.jsonl", 1)[0]


def _show(prompts: dict) -> None:
    for config_id, prompt in prompts.items():
        print(f"\n===== {config_id} =====")
        if isinstance(prompt, GenerationPrompt):
            print(f"[permutation {prompt.permutation}, gold at {prompt.labels[prompt.gold_position]}]")
            print(prompt.text)
            print(f"--- chat user message ---\n{prompt.messages[0]['content']}")
        else:
            print(f"[context]\n{prompt.context}")
            for i, continuation in enumerate(prompt.continuations):
                print(f"[continuation {i}{' (gold)' if i == prompt.gold else ''}] {continuation!r}")


def _check_generation(item: Item, prompt: GenerationPrompt) -> None:
    fmt = get_config(prompt.config_id).format
    question = item.question.strip()
    assert prompt.text.startswith(f"Question: {question}\n")
    assert prompt.text.endswith(f"\n{ANSWER_CUE}")
    assert prompt.labels == (DIGIT_LABELS if fmt == "digit" else LETTER_LABELS)
    assert prompt.options == tuple(item.choices[p].strip() for p in prompt.permutation)
    line = {"letter": "{}. {}", "paren": "({}) {}", "digit": "{}. {}", "instruct": "{}. {}"}[fmt]
    body = "\n".join([f"Question: {question}"]
                     + [line.format(lab, opt) for lab, opt in zip(prompt.labels, prompt.options)]
                     + ([INSTRUCTION] if fmt == "instruct" else []))
    assert prompt.text == body + "\nAnswer:"
    assert (INSTRUCTION in prompt.text) == (fmt == "instruct")
    assert prompt.messages == ({"role": "user", "content": prompt.text[: -len("\n" + ANSWER_CUE)]},)


def test_all_26_prompts_rendered_and_shown(item: Item) -> None:
    prompts = render_all(item, SEED)
    _show(prompts)
    assert list(prompts) == list(CONFIG_IDS)
    for config_id, prompt in prompts.items():
        assert prompt.config_id == config_id
        if get_config(config_id).scoring == "generate":
            _check_generation(item, prompt)
        else:
            assert isinstance(prompt, ClozePrompt)


def test_five_shuffles_are_distinct_non_identity_permutations(item: Item) -> None:
    prompts = render_all(item, SEED)
    by_order = {}
    for config_id, prompt in prompts.items():
        config = get_config(config_id)
        if config.scoring == "generate":
            # every format of one order shows the same permutation
            assert by_order.setdefault(config.order, prompt.permutation) == prompt.permutation
    assert by_order["o0"] == IDENTITY
    shuffles = [by_order[f"o{k}"] for k in range(1, 6)]
    assert len(set(shuffles)) == 5
    assert IDENTITY not in shuffles
    assert all(sorted(p) == [0, 1, 2, 3] for p in shuffles)
    assert render_all(item, SEED) == prompts  # reproducible
    assert tuple(by_order[f"o{k}"] for k in range(6)) == item_shuffles(SEED, item.item_uid)


def test_a_different_seed_gives_different_shuffles() -> None:
    assert item_shuffles(1, BUILTIN.item_uid) != item_shuffles(0, BUILTIN.item_uid)
    assert render(BUILTIN, "o0.letter", 1) == render(BUILTIN, "o0.letter", 0)


def test_gold_maps_through_every_permutation(item: Item) -> None:
    gold_text = item.choices[item.gold].strip()
    for prompt in render_all(item, SEED).values():
        if not isinstance(prompt, GenerationPrompt):
            continue
        assert prompt.options[prompt.gold_position] == gold_text
        assert prompt.native_index(prompt.gold_position) == item.gold
        assert prompt.native_index(-1) == -1
        label = prompt.labels[prompt.gold_position]
        assert f"{label}. {gold_text}" in prompt.text or f"({label}) {gold_text}" in prompt.text
        # a model answering with the gold label is scored correct
        parsed = parse_answer(f" {label}", prompt.labels, prompt.options)
        assert prompt.native_index(parsed) == item.gold


def test_cloze_continuations_are_four_and_order_independent(item: Item) -> None:
    # cloze text is the item's as it is in the file, as lm-eval uses it (no stripping)
    expected = tuple(" " + c for c in item.choices)
    question = item.question
    for seed in (0, 1, 99):
        qa, bare = render(item, "cloze_qa", seed), render(item, "cloze_bare", seed)
        assert qa.continuations == bare.continuations == expected
        assert qa.gold == bare.gold == item.gold
        assert qa.context == f"Question: {question}\nAnswer:"
        assert bare.context == question
        assert qa.texts[item.gold] == qa.context + " " + item.choices[item.gold]
    # a recorded permutation cannot reorder the cloze options
    assert render(item, "cloze_qa", SEED, permutation=(3, 2, 1, 0)).continuations == expected


def test_golden_template_of_the_builtin_item() -> None:
    prompt = render(BUILTIN, "o0.letter", SEED)
    assert prompt.text == BUILTIN_O0_LETTER
    assert prompt.gold_position == 1


def test_rerender_from_a_recorded_permutation() -> None:
    prompt = render(BUILTIN, "o3.paren", SEED)
    again = render(BUILTIN, "o3.paren", seed=12345, permutation=prompt.permutation)
    assert again == prompt
    forced = render(BUILTIN, "o0.digit", SEED, permutation=(3, 2, 1, 0))
    assert forced.options[0] == "212 K" and forced.gold_position == 2
    assert forced.text.split("\n")[2] == "1. 212 K"


def test_bad_permutation_and_unknown_config_are_rejected() -> None:
    with pytest.raises(ValueError, match="not a permutation"):
        render(BUILTIN, "o1.letter", SEED, permutation=(0, 0, 1, 2))
    with pytest.raises(KeyError, match="unknown config"):
        render(BUILTIN, "o6.letter", SEED)


def test_shared_prefix_is_the_question_stem(item: Item) -> None:
    prompts = render_all(item, SEED)
    stem = f"Question: {item.question.strip()}\n"
    # cloze_qa keeps the question unstripped: it shares the stem when there is no outer
    # whitespace to strip
    with_stem = [p for cid, p in prompts.items() if cid != "cloze_bare"
                 and (cid != "cloze_qa" or item.question == item.question.strip())]
    assert shared_prefix(with_stem) == stem
    # letter and instruct of one order differ only after the options ("Answer:" vs "Answer with")
    letter, instruct = prompts["o2.letter"], prompts["o2.instruct"]
    assert shared_prefix([letter, instruct]) == letter.text[:-1]
    assert shared_prefix(prompts) == ""  # cloze_bare starts without "Question: "
    assert shared_prefix([]) == ""


@pytest.mark.shared
@pytest.mark.parametrize("name", ["arc_challenge_test.jsonl", "arc_easy_test.jsonl",
                                  "hellaswag_val.jsonl", "mmlu_test.jsonl", "truthfulqa_mc1.jsonl"])
def test_invariants_on_real_items(name: str, shared_benchmarks: Path) -> None:
    for item in _four_option_items(shared_benchmarks / name, 150):
        for prompt in render_all(item, SEED).values():
            if isinstance(prompt, GenerationPrompt):
                _check_generation(item, prompt)
                assert prompt.native_index(prompt.gold_position) == item.gold
            else:
                assert len(prompt.continuations) == 4


def _doc_blocks(config_id: str, doc: str) -> list[str]:
    """The fenced blocks under the doc's '### {config_id}' heading."""
    section = doc.split(f"\n### {config_id}\n", 1)[1].split("\n### ", 1)[0]
    return [block.split("\n", 1)[1] for block in section.split("```")[1::2]]


def test_docs_show_exactly_what_the_renderer_produces(shared_benchmarks: Path) -> None:
    """docs/prompts.md's 26 examples are the renderer's output for the same real item."""
    item = _four_option_items(shared_benchmarks / "arc_challenge_test.jsonl", 1)[0]
    assert item.item_uid == "arc_challenge/Mercury_7175875"
    doc = (REPO / "docs" / "prompts.md").read_text(encoding="utf-8")
    for config_id, prompt in render_all(item, SEED).items():
        blocks = _doc_blocks(config_id, doc)
        if isinstance(prompt, GenerationPrompt):
            assert blocks == [prompt.text + "\n"], config_id
            section = doc.split(f"\n### {config_id}\n", 1)[1]
            assert f"Permutation `{''.join(map(str, prompt.permutation))}`" in section
        else:
            assert blocks[0] == prompt.context + "\n", config_id
            assert json.loads(blocks[1]) == list(prompt.continuations), config_id
