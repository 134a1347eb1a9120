"""The chat template's rendering of a generation prompt, as an instruct model saw it, without
transformers (the TUI never imports it): the same Jinja sandbox, filters and globals that
transformers' `apply_chat_template(tokenize=False, add_generation_prompt=True)` uses
(`transformers.utils.chat_template_utils._compile_jinja_template`), fed the template text,
the pinned template arguments and the special tokens the runner recorded with the model
(runners/models/provenance.py). tests/harness/test_chat.py checks it against transformers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

# The date a template that reads it sees: the app renders with it, and the runner pins
# transformers' `strftime_now` and `date_string` to it (runners/models/fingerprint.py), so
# both render the same prompt. Defined here only.
TEMPLATE_DATE = datetime(2024, 7, 26)


@dataclass(frozen=True)
class ChatTemplate:
    """What a model's provenance records of its prompt mode and chat template."""

    mode: str  # "chat" or "raw"
    template: str | None = None  # the template text (None: only its hash was recorded)
    sha256: str | None = None
    args: dict = field(default_factory=dict)  # pinned template arguments (enable_thinking, ...)
    tokens: dict = field(default_factory=dict)  # special tokens map (bos_token, eos_token, ...)

    @classmethod
    def from_provenance(cls, p: dict | None) -> "ChatTemplate":
        """A model row's or a run's `models.<name>` provenance (raw when it says nothing)."""
        p = p or {}
        mode = {"chat template": "chat", "chat": "chat"}.get(p.get("prompt_mode"), "raw")
        tokens = p.get("chat_template_tokens") or {}
        return cls(mode, p.get("chat_template") if isinstance(p.get("chat_template"), str)
                   else None, p.get("chat_template_sha256"), dict(p.get("template_args") or {}),
                   {k: v for k, v in tokens.items() if isinstance(v, (str, list))})

    @property
    def verified(self) -> bool:
        """The recorded text is the template the run hashed (a hand-edited record is not)."""
        return (self.template is not None and self.sha256 is not None
                and hashlib.sha256(self.template.encode()).hexdigest() == self.sha256)


def render_chat(template: ChatTemplate, messages) -> str:
    """The text the chat template makes of `messages`, with the generation prompt appended."""
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return TEMPLATE_DATE.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    compiled = env.from_string(template.template or "")
    return compiled.render(messages=[dict(m) for m in messages], tools=None, documents=None,
                           add_generation_prompt=True, **{**template.tokens, **template.args})
