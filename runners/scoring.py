"""Scoring core: log-likelihoods and greedy generation over a prefix tree of prompts.

Prefill walks the batch's token radix tree (runners.prefix_tree) depth first: each node's
segment is forwarded once, on top of its parent's KV cache, so a prefix shared by many
prompts (chat header, question stem, cloze context) costs its tokens once. On a CPU a
single row of a few dozen tokens already fills the matrix units, so prefill needs no
padding at all; the batching that matters is decoding, where the leaves of every prompt in
the batch advance together one token per step (caches left-padded to a common length,
masked, with explicit position ids) and a row leaves the batch as soon as its answer is
decided (parser.is_decided), it emits EOS, or it reaches max_new_tokens.

The output head (vocabulary projection) runs apart from the decoder: prefill keeps hidden
states, and the head is applied once per batch to the rows that need logits (scored cloze
positions, the last position of each generation prompt). A per-node head call re-reads the
whole vocabulary matrix for a handful of rows (670 MB for Gemma 3's 262k vocabulary); one
batched call reads it once. Models whose head cannot be split off this way (checked on a
probe at construction) fall back to full-model logits per node.

Likelihood requests follow lm-evaluation-harness: the request's tokens are the encoding of
context + continuation; scored tokens are those after the context's own encoding length; the
score is the sum of their log-softmax. Results do not depend on batch composition or on
prefix reuse beyond float rounding (tests/runners check both).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Callable, Hashable

import torch

from runners.prefix_tree import Node, build_tree, count_tokens, mark_logprob_nodes


@dataclass
class GenRequest:
    key: Hashable
    tokens: list[int]
    decided: Callable[[str], bool]  # True once no continuation can change the parse


@dataclass
class LikelihoodRequest:
    key: Hashable
    tokens: list[int]  # context + continuation, encoded as one string
    scored_from: int  # first scored token position (the context's own encoding length)


@dataclass
class GenResult:
    text: str
    new_tokens: int
    stop: str  # decided | eos | length


@dataclass
class ScoreStats:
    prompt_tokens: int = 0  # prompt tokens forwarded in prefill
    unique_prompt_tokens: int = 0  # tokens of the batch's prompt tree
    total_prompt_tokens: int = 0  # sum of all prompt lengths (what no reuse would forward)
    decode_tokens: int = 0  # generated tokens fed back through the model
    decode_padding: int = 0  # masked cache slots attended over during decoding
    seconds: float = 0.0

    def add(self, other: "ScoreStats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def forwarded(self) -> int:
        return self.prompt_tokens + self.decode_tokens


@dataclass
class _Leaf:
    kv: list[tuple[torch.Tensor, torch.Tensor]]
    last: torch.Tensor  # features of the prompt's last position (see Scorer._forward)
    length: int


class _PendingLogprobs:
    """Scored positions collected during prefill, sent through the output head at once."""

    CHUNK_ROWS = 128  # bounds the logits in memory: 128 x vocabulary floats

    def __init__(self):
        self.rows: list[torch.Tensor] = []
        self.targets: list[int] = []
        self.spans: list[tuple[int, int, bool]] = []  # (first row, row count, lead NaN)

    def add(self, rows: torch.Tensor, targets: list[int], lead_nan: bool) -> int:
        self.spans.append((len(self.targets), len(targets), lead_nan))
        self.rows.append(rows)
        self.targets.extend(targets)
        return len(self.spans) - 1

    def resolve(self, head: Callable[[torch.Tensor], torch.Tensor]) -> list[torch.Tensor]:
        """log P(target | prefix) per added span (NaN first when lead_nan)."""
        if not self.spans:
            return []
        rows = torch.cat(self.rows)
        targets = torch.tensor(self.targets, device=rows.device)
        parts = []
        for start in range(0, len(targets), self.CHUNK_ROWS):
            logits = head(rows[start:start + self.CHUNK_ROWS])
            chunk_targets = targets[start:start + self.CHUNK_ROWS, None]
            parts.append(torch.log_softmax(logits, dim=-1).gather(1, chunk_targets)[:, 0])
        logprobs = torch.cat(parts).cpu()
        nan = torch.tensor([float("nan")])
        return [torch.cat([nan, logprobs[first:first + count]]) if lead_nan
                else logprobs[first:first + count] for first, count, lead_nan in self.spans]


@dataclass
class BatchResult:
    generations: dict = field(default_factory=dict)  # key -> GenResult
    loglikelihoods: dict = field(default_factory=dict)  # key -> (sum logprob, n tokens)
    stats: ScoreStats = field(default_factory=ScoreStats)


class Scorer:
    def __init__(self, model, tokenizer, eos_ids, *, max_new_tokens: int = 16,
                 prefix_reuse: bool = True):
        self.model = model
        self.tokenizer = tokenizer
        self.eos_ids = frozenset(eos_ids)
        self.max_new_tokens = max_new_tokens
        self.prefix_reuse = prefix_reuse
        self.device = next(model.parameters()).device
        self._cache_kw = _cache_keyword(model)
        self._backbone, self._head = _split_output_head(model, self._cache_kw, self.device)

    # -- public -------------------------------------------------------------------------

    @torch.no_grad()  # not inference_mode: optimum-quanto tensors refuse it
    def score(self, gen: list[GenRequest], lik: list[LikelihoodRequest]) -> BatchResult:
        started = time.perf_counter()
        sequences = [r.tokens for r in gen] + [r.tokens for r in lik]
        if any(len(s) == 0 for s in sequences):
            raise ValueError("empty prompt")
        roots = build_tree(sequences, share=self.prefix_reuse)
        scored_from = {len(gen) + i: r.scored_from for i, r in enumerate(lik)}
        mark_logprob_nodes(roots, scored_from)
        result = BatchResult()
        result.stats.unique_prompt_tokens = count_tokens(build_tree(sequences, share=True))
        result.stats.total_prompt_tokens = sum(map(len, sequences))
        leaves: dict[int, _Leaf] = {}
        paths: dict[int, list] = {}  # likelihood request index -> its path's logprob parts
        pending = _PendingLogprobs()
        for root in roots:
            self._prefill(root, [], None, [], len(gen), leaves, paths, pending, result)
        scored = pending.resolve(self._head)
        for index, path in paths.items():
            request = lik[index - len(gen)]
            parts = [scored[part] if isinstance(part, int) else part for part in path]
            token_lp = torch.cat(parts)[request.scored_from:]
            result.loglikelihoods[request.key] = (float(token_lp.sum()), int(token_lp.numel()))
        if gen:
            self._decode(gen, leaves, result)
        result.stats.seconds = time.perf_counter() - started
        return result

    # -- prefill ------------------------------------------------------------------------

    def _prefill(self, node: Node, kv, parent_last, path, n_gen, leaves, paths, pending, result):
        """Forward `node` on its parent's cache `kv`, then its children (depth first).

        `path` lists, per segment from the root, either a NaN tensor (nothing scored there)
        or the index of its span in `pending` (resolved after the walk)."""
        if node.segment:
            features, kv = self._forward(node.segment, kv, node.start)
            result.stats.prompt_tokens += len(node.segment)
            last = features[-1]
            if node.needs_logprobs:
                if parent_last is None:  # a root's first token has no prediction; never scored
                    path = path + [pending.add(features[:-1], node.segment[1:], lead_nan=True)]
                else:
                    rows = torch.cat([parent_last[None], features[:-1]])
                    path = path + [pending.add(rows, node.segment, lead_nan=False)]
            else:
                path = path + [torch.full((len(node.segment),), float("nan"))]
        else:
            last = parent_last
        for index in node.requests:
            if index < n_gen:
                leaves[index] = _Leaf(kv, last, node.end)
            else:
                paths[index] = path
        for child in node.children:
            self._prefill(child, kv, last, path, n_gen, leaves, paths, pending, result)

    def _forward(self, tokens: list[int], kv, start: int):
        """Features of every position of `tokens` on cache `kv`, and the extended cache.
        Features are hidden states for self._head, or logits when the head is not split."""
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=kv) if kv else DynamicCache()
        ids = torch.tensor([tokens], device=self.device)
        positions = torch.arange(start, start + len(tokens), device=self.device)[None]
        out = self._backbone(input_ids=ids, position_ids=positions, use_cache=True,
                             **{self._cache_kw: cache})
        features = out.last_hidden_state if self._backbone is not self.model else out.logits
        new_kv = [(layer.keys, layer.values) for layer in cache.layers]
        return features[0], new_kv

    # -- decoding -----------------------------------------------------------------------

    def _decode(self, gen: list[GenRequest], leaves: dict[int, _Leaf], result: BatchResult):
        """Greedy decoding of every generation leaf together, dropping rows as they finish."""
        order = list(range(len(gen)))
        lengths = torch.tensor([leaves[i].length for i in order], device=self.device)
        width = int(lengths.max())
        cache = self._stack_caches([leaves[i] for i in order], width)
        mask = (torch.arange(width, device=self.device)[None] >= (width - lengths)[:, None]).long()
        logits = self._head(torch.stack([leaves[i].last for i in order]))
        generated: dict[int, list[int]] = {i: [] for i in order}
        active = order
        step = 0
        while active:
            next_tokens = logits.argmax(dim=-1).tolist()  # first maximum on ties
            keep = []
            for row, (index, token) in enumerate(zip(active, next_tokens)):
                stop = self._stop_reason(gen[index], generated[index], token)
                if stop is None:
                    keep.append(row)
                else:
                    tokens = generated[index]
                    result.generations[gen[index].key] = GenResult(
                        self._text(tokens), len(tokens), stop)
            if not keep:
                break
            if len(keep) < len(active):
                index_tensor = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index_tensor)
                mask, lengths = mask[index_tensor], lengths[index_tensor]
                next_tokens = [next_tokens[r] for r in keep]
                active = [active[r] for r in keep]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            positions = (lengths + step)[:, None]
            out = self.model(input_ids=torch.tensor(next_tokens, device=self.device)[:, None],
                             attention_mask=mask, position_ids=positions, use_cache=True,
                             **{self._cache_kw: cache})
            result.stats.decode_tokens += len(active)
            result.stats.decode_padding += int((mask == 0).sum())
            logits = out.logits[:, -1].float()
            step += 1

    def _stop_reason(self, request: GenRequest, tokens: list[int], token: int) -> str | None:
        """Append `token` (unless EOS) and say why the sequence stops now, if it does."""
        if token in self.eos_ids:
            return "eos"
        tokens.append(token)
        text = self._text(tokens)
        # A trailing U+FFFD is half a multi-byte character: wait for the rest before judging.
        if not text.endswith("\ufffd") and request.decided(text):
            return "decided"
        if len(tokens) >= self.max_new_tokens:
            return "length"
        return None

    def _text(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)

    def _stack_caches(self, leaves: list[_Leaf], width: int):
        """One batched cache from per-leaf caches, left-padded with zeros to `width`."""
        from transformers import DynamicCache

        layers = []
        for layer in range(len(leaves[0].kv)):
            keys, values = [], []
            for leaf in leaves:
                k, v = leaf.kv[layer]
                pad = width - k.shape[-2]
                keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)))
                values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)))
            layers.append((torch.cat(keys), torch.cat(values)))
        return DynamicCache(ddp_cache_data=layers)


def _cache_keyword(module) -> str:
    # transformers 5.x renames past_key_values to cache (the old name warns).
    params = inspect.signature(module.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _split_output_head(model, cache_kw: str, device):
    """(decoder, head) such that head(decoder(...).last_hidden_state) == model(...).logits,
    checked on a probe input; (model, float) when the model cannot be split that way."""
    whole = (model, lambda logits: logits.float())
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    lm_head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if decoder is None or lm_head is None or decoder is model:
        return whole
    if _cache_keyword(decoder) != cache_kw:
        return whole
    softcap = getattr(model.config, "final_logit_softcapping", None)

    def head(hidden: torch.Tensor) -> torch.Tensor:
        logits = lm_head(hidden)
        if softcap is not None:
            logits = torch.tanh(logits / softcap) * softcap
        return logits.float()

    probe = torch.arange(1, 6, device=device)[None] % model.config.vocab_size
    with torch.no_grad():
        try:
            expected = model(input_ids=probe).logits[0].float()
            got = head(decoder(input_ids=probe).last_hidden_state[0])
        except Exception:  # an architecture that needs more than input_ids to run alone
            return whole
    if got.shape != expected.shape or not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
        return whole
    return decoder, head
