"""A fake vLLM engine for tests: vLLM's offline interface, computed by a transformers model.

Shapes follow vLLM (vllm/outputs.py, vllm/logprobs.py, vllm/sampling_params.py):
`LLM.generate(prompts, sampling_params, use_tqdm=...)` takes token-id prompts
(`{"prompt_token_ids": [...]}`, a TokensPrompt) and one SamplingParams or a list, and returns
one RequestOutput per prompt, in order: `outputs[0]` is a CompletionOutput (`text`,
`token_ids` including a stop token it stopped at, `finish_reason` "stop" or "length"),
`prompt_logprobs` a list with None at position 0 and, at every later position, a dict
{token id: Logprob} holding the prompt's own token and the top-k, and `num_cached_tokens`.
Prefix caching is simulated in 16-token blocks; a request that asks for prompt
log-probabilities does not read the cache (vLLM's `skip_reading_prefix_cache` default).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

BLOCK = 16


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list
    cumulative_logprob: float | None
    logprobs: list | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list
    prompt_logprobs: list | None
    outputs: list
    finished: bool
    num_cached_tokens: int | None = None


@dataclass(frozen=True)
class SamplingParams:
    """The SamplingParams fields the backend may set; any other keyword is a TypeError, as
    with vLLM's own class."""

    temperature: float = 1.0
    max_tokens: int | None = 16
    stop_token_ids: list | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True


@dataclass
class FakeLLM:
    model: object
    tokenizer: object
    enable_prefix_caching: bool = True
    calls: list = field(default_factory=list)  # (prompts, sampling params) per generate call
    _blocks: set = field(default_factory=set)

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        if not isinstance(sampling_params, list):
            sampling_params = [sampling_params] * len(prompts)
        assert len(sampling_params) == len(prompts)
        self.calls.append((prompts, sampling_params))
        return [self._one(i, prompt["prompt_token_ids"], params)
                for i, (prompt, params) in enumerate(zip(prompts, sampling_params))]

    @torch.no_grad()
    def _one(self, index, ids: list[int], params: SamplingParams) -> RequestOutput:
        assert params.temperature == 0.0, "only greedy decoding is faked"
        cached = self._cache(ids, read=params.prompt_logprobs is None)
        logits = self.model(input_ids=torch.tensor([ids])).logits[0].float()
        prompt_logprobs = None
        if params.prompt_logprobs is not None:
            prompt_logprobs = [None] + [self._position(row, token, params.prompt_logprobs)
                                        for row, token in zip(logits[:-1], ids[1:])]
        generated, finish, stop = [], "length", None
        next_logits = logits[-1]
        while len(generated) < params.max_tokens:
            token = int(next_logits.argmax())
            generated.append(token)
            if token in (params.stop_token_ids or []):
                finish, stop = "stop", token
                break
            sequence = torch.tensor([ids + generated])
            next_logits = self.model(input_ids=sequence).logits[0, -1].float()
        text = (self.tokenizer.decode(generated, skip_special_tokens=params.skip_special_tokens)
                if params.detokenize else "")
        completion = CompletionOutput(0, text, generated, None, None, finish, stop)
        return RequestOutput(str(index), None, list(ids), prompt_logprobs, [completion], True,
                             cached)

    @staticmethod
    def _position(row: torch.Tensor, token: int, top: int) -> dict:
        logprobs = torch.log_softmax(row, dim=-1)
        order = torch.argsort(logprobs, descending=True)
        ranks = {int(t): r + 1 for r, t in enumerate(order[:max(top, 1)].tolist())}
        entry = {t: Logprob(float(logprobs[t]), r) for t, r in list(ranks.items())[:top]}
        rank = ranks.get(token) or int((logprobs > logprobs[token]).sum()) + 1
        entry[token] = Logprob(float(logprobs[token]), rank)
        return entry

    def _cache(self, ids: list[int], read: bool) -> int:
        """Tokens found in cached full blocks (at most all but the last), then cache them."""
        if not self.enable_prefix_caching:
            return 0
        hit = 0
        if read:
            while (hit + BLOCK <= len(ids) - 1) and tuple(ids[:hit + BLOCK]) in self._blocks:
                hit += BLOCK
        for end in range(BLOCK, len(ids) + 1, BLOCK):
            self._blocks.add(tuple(ids[:end]))
        return hit
