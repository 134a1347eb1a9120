"""harness/chat.py renders a chat template as transformers' apply_chat_template does (the
exact text an instruct model was given), without importing transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fragility_tui.harness.chat import ChatTemplate, render_chat
from fragility_tui.harness.render import render
from fragility_tui.items.item import Item

REPO = Path(__file__).resolve().parents[2]
ITEM = Item("arc_easy/x1", "arc_easy", None, "Which gas do plants absorb?",
            ("oxygen", "nitrogen", "carbon dioxide", "helium"), 2)


def shipped_smollm2() -> dict:
    doc = json.loads((REPO / "sample_grids" / "starter-real.provenance.json").read_text())
    return next(m["provenance"] for m in doc["models"]
                if m["model"] == "smollm2-135m-instruct")


TEMPLATES = {
    # what transformers passes besides the messages: special tokens, pinned arguments
    "bos and eos": "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}"
                   "{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}[assistant] "
                   "{% endif %}",
    "thinking off and a date": "{% if enable_thinking is defined and not enable_thinking %}"
                               "<no-think>{% endif %}Today {{ strftime_now('%d %B %Y') }}\n"
                               "{% for m in messages %}{{ m | tojson }}{% endfor %}",
    "loop controls": "{% for m in messages %}{% if m['role'] == 'system' %}{% continue %}"
                     "{% endif %}{{ m['content'] | trim }}{% endfor %}",
}


def test_the_shipped_smollm2_template_is_recorded_and_verified():
    chat = ChatTemplate.from_provenance(shipped_smollm2())
    assert chat.mode == "chat" and chat.verified
    text = render_chat(chat, render(ITEM, "o0.letter", 0).messages)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert "<|im_start|>user\nQuestion: Which gas do plants absorb?" in text
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n") and "Answer:" not in text


@pytest.mark.parametrize("name", [*TEMPLATES, "shipped smollm2"])
def test_rendering_equals_transformers(name):
    pytest.importorskip("transformers")
    from transformers.utils.chat_template_utils import render_jinja_template

    from runners.models.fingerprint import pinned_date, template_args

    template = shipped_smollm2()["chat_template"] if name == "shipped smollm2" else TEMPLATES[name]
    tokens = {"bos_token": "<s>", "eos_token": "</s>"}
    chat = ChatTemplate("chat", template, None, template_args(template), tokens)
    messages = list(render(ITEM, "o3.digit", 7).messages)
    with pinned_date():  # as the runner renders (runners/plan/item_requests.py)
        expected, _ = render_jinja_template(conversations=[messages], chat_template=template,
                                            add_generation_prompt=True,
                                            **{**tokens, **template_args(template)})
    assert render_chat(chat, messages) == expected[0]


def test_an_unverified_or_missing_template_is_not_trusted():
    p = dict(shipped_smollm2())
    assert not ChatTemplate.from_provenance({**p, "chat_template": "{{ 'x' }}"}).verified
    legacy = ChatTemplate.from_provenance({**p, "chat_template": None})
    assert legacy.mode == "chat" and legacy.template is None and not legacy.verified
    assert ChatTemplate.from_provenance({"prompt_mode": "raw prompt"}).mode == "raw"
