"""What the scorer is asked and what it returns, shared by every backend (the transformers
scorer, runners.backends.transformers.decoding, runners.backends.vllm): requests, results, counters, and the one
rule that stops a generation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable


@dataclass
class GenRequest:
    key: Hashable
    tokens: list[int]
    decided: Callable[[str], bool]  # True once no continuation can change the parse


@dataclass
class LikelihoodRequest:
    key: Hashable
    tokens: list[int]  # context_enc + continuation_enc, as lm-eval feeds them
    scored_from: int  # first scored token position (the context's own encoding length)


@dataclass
class GenResult:
    text: str
    new_tokens: int
    stop: str  # decided | eos | length
    # The smallest top-1 minus top-2 logit gap (= log-probability gap) over the steps
    # taken; None from a backend that does not see the logits (runners/plan/numerics.py).
    margin: float | None = None
    # What the cell stores when it must differ from what is parsed: a served answer with
    # the API key redacted (the parse reads `text`, the answer as the server gave it).
    stored_text: str | None = None


def stop_reason(request: GenRequest, tokens: list[int], token: int, eos_ids, max_new_tokens: int,
                text: Callable[[list[int]], str]) -> str | None:
    """Append `token` (unless EOS) to a generation's `tokens` and say why it stops now, if
    it does: eos, decided (the parse cannot change) or length. Every backend cuts its
    generations with this rule (runners.backends.vllm replays it over the engine's tokens)."""
    if token in eos_ids:
        return "eos"
    tokens.append(token)
    decoded = text(tokens)
    # A trailing U+FFFD is half a multi-byte character: wait for the rest before judging.
    if not decoded.endswith("\ufffd") and request.decided(decoded):
        return "decided"
    if len(tokens) >= max_new_tokens:
        return "length"
    return None


@dataclass
class ScoreStats:
    prompt_tokens: int = 0  # prompt tokens forwarded in prefill
    unique_prompt_tokens: int = 0  # tokens of the batch's prompt tree
    total_prompt_tokens: int = 0  # sum of all prompt lengths (what no reuse would forward)
    prompt_padding: int = 0  # padded positions run through the decoder in prefill
    decode_tokens: int = 0  # generated tokens fed back through the model
    decode_padding: int = 0  # padded query positions run through the model in decoding
    prefill_calls: int = 0  # decoder calls in prefill
    decode_calls: int = 0  # model calls in decoding (one per step and call)
    seconds: float = 0.0

    def add(self, other: "ScoreStats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def forwarded(self) -> int:
        return self.prompt_tokens + self.decode_tokens

    def token_record(self, item_trees: int) -> dict:
        """Tokens forwarded against what the prompts hold (for the run's provenance)."""
        return {"prompt_forwarded": self.prompt_tokens, "item_tree_tokens": item_trees,
                "prompt_without_reuse": self.total_prompt_tokens,
                "prompt_padding": self.prompt_padding, "decode_forwarded": self.decode_tokens,
                "decode_padding": self.decode_padding, "prefill_calls": self.prefill_calls,
                "decode_calls": self.decode_calls}


@dataclass
class BatchResult:
    generations: dict = field(default_factory=dict)  # key -> GenResult
    loglikelihoods: dict = field(default_factory=dict)  # key -> (sum logprob, n tokens)
    stats: ScoreStats = field(default_factory=ScoreStats)
    # A served backend's own counts (runners.backends.openai.backend): key -> prompt tokens the
    # server reported, key -> seconds of its request. Empty for local backends.
    prompt_tokens: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
