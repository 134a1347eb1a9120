"""The cell explanation's numbers: one format per quantity (counts with separators, ms as
integers), never a raw float."""

from __future__ import annotations

from fragility_tui.items.item import Item
from fragility_tui.tui.cell_explain import cell_detail


def test_cost_figures_are_formatted_not_raw():
    item = Item("toy/1", "toy", None, "What?", ("a", "b", "c", "d"), 0)
    cell = {"model": "m", "config_id": "o0.letter", "correct": True, "pred": 0,
            "permutation": "0123", "raw_output": "A", "scores": None, "tokens": 12345,
            "ms": 213.69775390625, "run_id": "r1"}
    text = cell_detail(item, "m", "o0.letter", cell, seed=0).plain
    assert "tokens 12,345 · 214 ms · run r1" in text
    assert "213.69" not in text


def test_cell_details_show_the_prompt_hash():
    cell = {"correct": True, "pred": 0, "scores": None, "prompt_sha": "ab" * 32}
    assert "prompt tokens sha256 abababababababab…" in cell_detail(None, "m", "cloze_qa", cell,
                                                                     0).plain


def test_a_near_tie_cell_says_so_with_its_margin():
    near = {"correct": False, "pred": 1, "scores": None, "margin": 0.0123, "near_tie": True}
    text = cell_detail(None, "m", "o0.letter", near, 0).plain
    assert "near-tie: margin 0.0123 is inside the run's rounding tolerance" in text
    far = dict(near, margin=4.5, near_tie=False)
    text = cell_detail(None, "m", "o0.letter", far, 0).plain
    assert "near-tie" not in text and "margin 4.5" in text


def _smollm2_chat():
    import json
    from pathlib import Path

    from fragility_tui.harness.chat import ChatTemplate

    doc = json.loads((Path(__file__).resolve().parents[2] / "sample_grids" /
                      "starter-real.provenance.json").read_text())
    return ChatTemplate.from_provenance(next(m["provenance"] for m in doc["models"]
                                             if m["model"] == "smollm2-135m-instruct"))


def test_an_instruct_model_s_prompt_is_the_chat_template_s_rendering():
    """Issue 24 (8): not the raw prompt with 'Answer:', the text the model was given."""
    from dataclasses import replace

    from fragility_tui.harness.chat import ChatTemplate

    item = Item("toy/1", "toy", None, "What?", ("a", "b", "c", "d"), 0)
    cell = {"correct": True, "pred": 0, "permutation": "0123", "raw_output": "A"}
    chat = _smollm2_chat()
    text = cell_detail(item, "m", "o0.letter", cell, 0, chat).plain
    assert "prompt as the model saw it (the chat template's rendering" in text
    assert "<|im_start|>user\nQuestion: What?" in text and "<|im_start|>assistant" in text
    assert "Answer:" not in text
    raw = cell_detail(item, "m", "o0.letter", cell, 0, ChatTemplate("raw")).plain
    assert "prompt as the model saw it (raw prompt" in raw and "Answer:" in raw
    # only the hash recorded (a run from before the text was kept): no claim of exactness
    legacy = cell_detail(item, "m", "o0.letter", cell, 0, replace(chat, template=None)).plain
    assert "prompt as the model saw it" not in legacy and "recorded only its chat template's hash" in legacy
    assert "Question: What?" in legacy and "Answer:" not in legacy


def test_a_model_with_no_prompt_mode_recorded_claims_nothing():
    item = Item("toy/1", "toy", None, "What?", ("a", "b", "c", "d"), 0)
    cell = {"correct": True, "pred": 0, "permutation": "0123", "raw_output": "A"}
    text = cell_detail(item, "m", "o0.letter", cell, 0, None).plain
    assert "prompt as the model saw it" not in text
    assert "records no prompt mode for the model" in text and "Answer:" in text


def test_a_letter_likelihood_cell_shows_its_context_labels_and_scores():
    """Issue 56 (5): the raw prompt, the labels scored after it with the native choice each
    stood for, the label log-likelihoods in native order with the prediction marked."""
    item = Item("toy/1", "toy", None, "What?", ("a", "b", "c", "d"), 0)
    cell = {"correct": False, "pred": 2, "permutation": "3021", "raw_output": None,
            "scores": [-3.0, -2.5, -0.5, -4.0]}
    text = cell_detail(item, "m", "o1.paren.lik+nobos", cell, 0, _smollm2_chat()).plain
    assert "context (letter likelihood: the raw generation prompt)" in text
    assert "(A) d\n(B) a\n(C) c\n(D) b\nAnswer:" in text  # raw, whatever the model's mode
    assert "0: ' (A)' → native choice 3" in text and "2: ' (C)' → native choice 2" in text
    assert "modifiers: the BOS token forced off (+nobos)" in text
    assert " → 2:    -0.5000" in text and "acc_norm" not in text


def test_raw_and_chat_modifiers_show_the_prompt_as_that_config_saw_it():
    from fragility_tui.harness.chat import ChatTemplate

    item = Item("toy/1", "toy", None, "What?", ("a", "b", "c", "d"), 0)
    cell = {"correct": True, "pred": 0, "permutation": "0123", "raw_output": "A"}
    chat = _smollm2_chat()
    raw = cell_detail(item, "m", "o0.letter+raw", cell, 0, chat).plain
    assert "modifiers: no chat template (+raw)" in raw
    assert "(raw prompt" in raw and "Answer:" in raw and "<|im_start|>" not in raw
    forced = cell_detail(item, "m", "o0.letter+chat", cell, 0,
                         ChatTemplate("raw", chat.template, chat.sha256, chat.args,
                                      chat.tokens)).plain
    assert "<|im_start|>assistant" in forced and "(the chat template's rendering" in forced


def test_a_letter_likelihood_cell_with_chat_shows_the_template_s_turn():
    item = Item("toy/1", "toy", None, "What?", ("a", "b", "c", "d"), 0)
    cell = {"correct": True, "pred": 0, "permutation": "0123", "raw_output": None,
            "scores": [-0.1, -2.0, -3.0, -4.0]}
    text = cell_detail(item, "m", "o0.letter.lik+chat", cell, 0, _smollm2_chat()).plain
    assert "context (letter likelihood: the chat template's assistant turn" in text
    assert "<|im_start|>assistant" in text and "0: 'A' → native choice 0" in text


def test_a_grid_imported_from_cells_alone_says_how_to_get_its_prompts():
    """A re-imported export has no item text: the drill-down said "cannot re-render the
    prompt: 0 choices, expected 4" in red."""
    bare = Item("toy/1", "toy", None, "", (), -1)
    cell = {"correct": True, "pred": 0, "scores": None, "permutation": "0123"}
    text = cell_detail(bare, "m", "o0.letter", cell, seed=0).plain
    assert "cannot re-render" not in text
    assert "no item text in this grid" in text and "--items" in text
