"""Scoring core: log-likelihoods and greedy generation for a batch of prompts, in batched
forwards over the batch's prompt tree (docs/runner.md, *Efficiency*, has the whole story).

- Prefill: every token sequence of the batch is a path in one token radix tree
  (runners.plan.prefix_tree). The tree goes through the decoder in rounds of fragments (a node
  plus as much of its subtree as fits `pack_tokens`), one row per fragment, many rows per
  call (runners.backends.transformers.prefill). A row's prefix keys and values are gathered from a pool holding
  each forwarded token once (runners.backends.transformers.kv_pool); a 4D tree mask lets each token see its
  prefix, its ancestors and its own earlier tokens, with explicit logical positions.
- Decoding: generation leaves grouped under shared prefixes, one row per group, one call
  per step for every going leaf; finished rows are refilled (runners.backends.transformers.decoding). A leaf stops
  at EOS, at max_new_tokens, or once parser.is_decided says its parse cannot change.
- The output head runs apart from the decoder, only on rows that need logits.
- Models whose attention ignores 4D masks get one node per row with 2D padding masks.

No call holds more than `max_slots` KV positions (rows x padded length); runners.backends.transformers.memory
sizes batches with the same budget. Likelihood requests follow lm-evaluation-harness (score
= the sum of the log-softmax of the tokens after the context's own encoding). Results do not
depend on batch composition, budget, layout or prefix reuse beyond float rounding
(tests/runners/test_scoring.py).
"""

from __future__ import annotations

import math
import os
import time
from collections import deque

import torch

from runners.backends.transformers import folded_attention
from runners.backends.transformers.decoding import (DECODE_GROUP_LEAVES, DecodingRows, decode_groups, decode_order,
                              take_rows)
from runners.backends.transformers.kv_pool import KVPool, KVScratch
from runners.backends.transformers.model_calls import ModelCalls, to_device
from runners.backends.transformers.model_probe import kv_bytes_per_token
from runners.backends.transformers.prefill import (Fragment, NodeState, PendingLogprobs,
                                                  constants_for, forward_groups, node_state)
from runners.plan.prefix_tree import (Node, build_tree, count_tokens, mark_logprob_nodes,
                                 mark_scored_leaves)
from runners.plan.score_types import (BatchResult, GenRequest, GenResult, LikelihoodRequest,
                                 ScoreStats, stop_reason)

__all__ = ["BatchResult", "GenRequest", "GenResult", "LikelihoodRequest", "ScoreStats",
           "Scorer", "stop_reason"]

DEFAULT_MAX_SLOTS = 16384  # KV positions one decoder call may hold (runners.plan.budget sets it)
DEFAULT_PACK_TOKENS = 256  # tokens of one packed prefill row (a fragment of the tree)
# The start-up probe's tolerance on a log-likelihood, relative to max(1, |ll|), per model
# dtype: batched and whole-sequence forwards differ by the dtype's rounding of the hidden
# states (bf16 keeps 8 bits of mantissa, fp16 11, fp32 24); a mask the model ignores moves a
# probe score by whole nats.
PROBE_TOLERANCE = {torch.float32: 1e-3, torch.float16: 5e-3, torch.bfloat16: 3e-2}


class Scorer:
    def __init__(self, model, tokenizer, eos_ids, *, max_new_tokens: int = 16,
                 prefix_reuse: bool = True, pack_tokens: int = DEFAULT_PACK_TOKENS):
        self.model = model
        self.tokenizer = tokenizer
        self.eos_ids = frozenset(eos_ids)
        self.max_new_tokens = max_new_tokens
        self.prefix_reuse = prefix_reuse
        self.pack_tokens = pack_tokens
        self.device = next(model.parameters()).device
        self.prefill_constants = constants_for(self.device)  # call cost, head rows: per device
        folded_attention.install()  # a decoding step's few queries per row: heads folded
        self.calls = ModelCalls(model, self.device)
        self.scratch = KVScratch()  # gathered caches, kept from batch to batch on a CPU
        self.kv_bytes_per_token = kv_bytes_per_token(model, self.calls.cache_kw, self.device)
        self.packing = self.calls.tree_masks and pack_tokens > 0
        self.probe: dict = {"ran": False}  # the tree-mask probe's outcome (provenance)
        self.packing = self.packing and self._tree_masks_work()  # the probe scores packed

    @property
    def layout(self) -> str:
        """How prefill rows are built, for provenance."""
        if self.packing:
            return (f"prefix-tree fragments of up to {self.pack_tokens} tokens per row, 4D "
                    "tree attention mask, prefix gathered and left-padded")
        return "one prefix-tree node per row, prefix gathered and left-padded, 2D mask"

    @torch.no_grad()
    def _tree_masks_work(self) -> bool:
        """Whether the model honours a 4D tree mask: a probe tree scored packed must give
        the log-likelihoods of plain whole-sequence forwards."""
        vocab = self.model.config.vocab_size
        probe = [[1, 2, 3, 4, 5], [1, 2, 6, 7], [1, 8, 9], [1, 2, 3, 10, 11]]
        requests = [LikelihoodRequest(i, [t % vocab for t in seq], 1)
                    for i, seq in enumerate(probe)]
        tolerance = PROBE_TOLERANCE.get(self.calls.mask_dtype, 1e-3)
        self.probe = {"ran": True, "passed": False, "tolerance": tolerance,
                      "largest_difference": None, "error": None}
        try:
            got = self.score([], requests).loglikelihoods
        except (RuntimeError, ValueError, TypeError) as exc:
            if "mask" not in str(exc).lower():
                raise  # not an attention implementation refusing custom masks: a real error
            self.probe["error"] = f"{type(exc).__name__}: {exc}"
            return False
        largest = 0.0
        for request in requests:
            ids = torch.tensor([request.tokens], device=self.device)
            logprobs = torch.log_softmax(self.calls.plain_logits(ids)[0], dim=-1)
            expected = float(logprobs[torch.arange(len(request.tokens) - 1),
                                      ids[0, 1:]].sum())
            largest = max(largest, abs(got[request.key][0] - expected) / max(1.0, abs(expected)))
        self.probe.update(largest_difference=largest, passed=largest <= tolerance)
        return self.probe["passed"]

    # -- public -------------------------------------------------------------------------

    def forget_kept_memory(self) -> None:
        """Let go of the memory kept for pools and caches (after running out of memory)."""
        self.scratch.clear()

    @torch.no_grad()  # not inference_mode: optimum-quanto tensors refuse it
    def score(self, gen: list[GenRequest], lik: list[LikelihoodRequest], *,
              max_slots: int = DEFAULT_MAX_SLOTS) -> BatchResult:
        """Score a batch; no forward holds more than `max_slots` KV positions (one row is
        always allowed, however long)."""
        started = time.perf_counter()
        sequences = [r.tokens for r in gen] + [r.tokens for r in lik]
        if any(len(s) == 0 for s in sequences):
            raise ValueError("empty prompt")
        roots = build_tree(sequences, share=self.prefix_reuse)
        scored_from = {len(gen) + i: r.scored_from for i, r in enumerate(lik)}
        mark_logprob_nodes(roots, scored_from)
        mark_scored_leaves(roots, len(gen))
        result = BatchResult()
        shared = roots if self.prefix_reuse else build_tree(sequences, share=True)
        result.stats.unique_prompt_tokens = count_tokens(shared)  # one tree when reusing
        result.stats.total_prompt_tokens = sum(map(len, sequences))
        pool = KVPool(count_tokens(roots, forwarded=True), self.scratch)
        pending = PendingLogprobs(self.prefill_constants.chunk_rows)
        leaves: dict[int, NodeState] = {}
        paths: dict[int, list] = {}  # likelihood request index -> its path's logprob parts
        self._prefill(roots, pool, pending, max_slots, len(gen), leaves, paths, result.stats)
        scored = pending.resolve(self.calls.head)
        for index, path in paths.items():
            request = lik[index - len(gen)]
            parts = [scored[part] if isinstance(part, int) else part for part in path]
            token_lp = torch.cat(parts)[request.scored_from:]
            result.loglikelihoods[request.key] = (float(token_lp.sum()), int(token_lp.numel()))
        if gen:
            self._decode(gen, leaves, pool, max_slots, result)
        result.stats.seconds = time.perf_counter() - started
        return result

    # -- prefill ------------------------------------------------------------------------

    def _prefill(self, roots, pool, pending, max_slots, n_gen, leaves, paths, stats):
        """Forward the tree in rounds of fragments; record every request's end state."""
        empty = NodeState(torch.zeros(0, dtype=torch.long), None, [])
        states: dict[int, NodeState] = {}  # id(node) -> its state, once forwarded
        starts = [(root, None) for root in roots]  # fragment roots with their parent node
        while starts:
            fragments = [self._fragment(node, states[id(parent)] if parent else empty)
                         for node, parent in starts]
            for group in forward_groups(fragments, max_slots,
                                        self.prefill_constants.forward_overhead_tokens):
                self._forward_fragments(group, pool, pending, states, stats)
            for node, _ in (pair for fragment in fragments for pair in fragment.members):
                state = states[id(node)]
                for index in node.requests:
                    if index < n_gen:
                        leaves[index] = NodeState(state.slots, state.last, [])
                    else:
                        paths[index] = state.parts
            starts = [pair for fragment in fragments for pair in fragment.deferred]

    def _fragment(self, root: Node, prefix: "NodeState") -> "Fragment":
        """`root` and, when packing, as much of its subtree (depth first, each node after
        its parent) as fits in pack_tokens; a node that does not fit starts a fragment of
        the next round. Empty-segment nodes (a request ending where others go on) always
        come along."""
        members, size, deferred = [(root, None)], len(root.forwarded), []
        stack = [(child, root) for child in reversed(root.children)]
        while stack:
            node, parent = stack.pop()
            n = len(node.forwarded)
            if not n or (self.packing and size + n <= self.pack_tokens):
                members.append((node, parent))
                size += n
                stack.extend((child, node) for child in reversed(node.children))
            else:
                deferred.append((node, parent))
        return Fragment(prefix, members, size, deferred)

    def _forward_fragments(self, fragments: list["Fragment"], pool: KVPool,
                           pending: PendingLogprobs, states: dict, stats: ScoreStats):
        """One decoder call, a row per fragment: [its prefix, gathered from the pool and
        left-padded][its nodes' tokens, depth first, right-padded]."""
        count = len(fragments)
        prefix_len = max(len(f.prefix.slots) for f in fragments)
        width = max(f.size for f in fragments)
        gather = torch.zeros(count, prefix_len, dtype=torch.long)  # slot 0: zero padding
        visible_members = []  # per member (numbered across the call): itself + ancestors
        tokens, sizes, starts, member_rows, offsets = [], [], [], [], []  # per member
        for r, fragment in enumerate(fragments):
            p = len(fragment.prefix.slots)
            gather[r, prefix_len - p:] = fragment.prefix.slots
            offset, number = 0, {}
            for node, parent in fragment.members:
                g = len(sizes)
                number[id(node)] = g
                visible_members.append((visible_members[number[id(parent)]] if parent else [])
                                       + [g])
                tokens.extend(node.forwarded)
                sizes.append(len(node.forwarded))
                starts.append(node.start)
                member_rows.append(r)
                offsets.append(offset)
                offset += len(node.forwarded)
        # Every token's row, column and logical position from per-member lists, in a few
        # tensor ops (no per-member tensor work): tokens are numbered depth first, row by
        # row, which is also the order of their fresh pool slots.
        sizes_t = torch.tensor(sizes, dtype=torch.long)
        token_member = torch.repeat_interleave(torch.arange(len(sizes)), sizes_t)
        first_token = torch.cumsum(sizes_t, 0) - sizes_t
        within = torch.arange(len(tokens)) - first_token[token_member]
        token_rows = torch.tensor(member_rows, dtype=torch.long)[token_member]
        token_cols = torch.tensor(offsets, dtype=torch.long)[token_member] + within
        token_positions = torch.tensor(starts, dtype=torch.long)[token_member] + within
        slots = pool.allocate_at(token_positions)
        ids = torch.zeros(count, width, dtype=torch.long)
        ids[token_rows, token_cols] = torch.tensor(tokens, dtype=torch.long)
        positions = torch.zeros(count, width, dtype=torch.long)
        positions[token_rows, token_cols] = token_positions
        member_of = torch.full((count, width), -1, dtype=torch.long)  # -1: padding
        member_of[token_rows, token_cols] = token_member
        # Padding repeats the row's last real position: never past what the model supports.
        lengths = torch.tensor([f.size for f in fragments], dtype=torch.long)
        last = positions.gather(1, (lengths - 1).clamp(min=0)[:, None])
        positions = torch.where(member_of >= 0, positions, last)
        placed = [(r, offset, slots[first:first + n]) for r, offset, first, n
                  in zip(member_rows, offsets, first_token.tolist(), sizes)]
        prefix_real = torch.arange(prefix_len)[None] >= (prefix_len - torch.tensor(
            [len(f.prefix.slots) for f in fragments]))[:, None]
        mask = self._prefill_mask(member_of, visible_members, prefix_real,
                                  pool.positions[gather], positions)
        if prefix_len:
            cache = pool.gather(gather, room=width)
        else:
            from transformers import DynamicCache

            cache = DynamicCache()
        features = self.calls.forward(ids, mask, positions, cache)
        real = member_of >= 0
        pool.store(cache, prefix_len, token_rows, token_cols, slots)
        del cache
        stats.prefill_calls += 1
        stats.prompt_tokens += int(real.sum())
        stats.prompt_padding += int((~real).sum())
        g = 0
        for fragment in fragments:
            for node, parent in fragment.members:
                r, offset, own_slots = placed[g]
                parent_state = states[id(parent)] if parent else fragment.prefix
                states[id(node)] = node_state(node, parent_state, own_slots,
                                               features[r, offset:offset + len(node.forwarded)],
                                               pending)
                g += 1

    def _prefill_mask(self, member_of, visible_members, prefix_real, key_positions,
                      positions):
        """The attention mask of a prefill call: 2D (key padding) when every row is one
        path, else a 4D tree mask: each token sees its row's prefix, its ancestors' tokens
        and its own earlier tokens."""
        real = member_of >= 0
        if not self.packing:
            return to_device(torch.cat([prefix_real, real], dim=1).long(), self.device)
        # Built on the device from small index tensors (one transfer each), not as a
        # [rows, queries, keys] mask on the host: the member pairs each token may see, the
        # member of each position, then one gather.
        device, width = self.device, member_of.shape[1]
        padding = len(visible_members)
        pairs = [(g, m) for g, members in enumerate(visible_members) for m in members]
        pairs.append((padding, padding))  # a padding position sees padding: never all-masked
        pairs = to_device(torch.tensor(pairs, dtype=torch.long), device)
        allowed = torch.zeros(padding + 1, padding + 1, dtype=torch.bool, device=device)
        allowed[pairs[:, 0], pairs[:, 1]] = True
        real = to_device(real, device)
        index = torch.where(real, to_device(member_of, device), padding)
        packed = allowed[index[:, :, None], index[:, None, :]] & torch.ones(
            width, width, dtype=torch.bool, device=device).tril()
        visible = torch.cat([to_device(prefix_real, device)[:, None, :] & real[:, :, None], packed],
                            dim=2)
        top_position = int(positions.max())  # on the host
        positions = to_device(positions, device)
        return self.calls.tree_mask(visible, positions,
                                    torch.cat([to_device(key_positions, device), positions],
                                              dim=1), top_position)

    # -- decoding -----------------------------------------------------------------------

    def _decode(self, gen: list[GenRequest], leaves: dict[int, NodeState], pool: KVPool,
                max_slots: int, result: BatchResult):
        """Greedy decoding of every generation leaf. With tree masks, leaves are grouped (in
        tree order) into rows whose keys are the union of their prompts, so a row holds a
        shared prefix once, and a row whose leaves are all done takes the next waiting group
        (continuous batching: one call per step for the whole batch, however many rows the
        budget holds at once). Without tree masks a row is one prompt, decoded in chunks."""
        groups = decode_groups(leaves, DECODE_GROUP_LEAVES if self.packing else 1)
        queue = deque(sorted(groups, key=decode_order))
        while queue:
            state = DecodingRows(self.calls, take_rows(queue, max_slots, self.max_new_tokens),
                                 leaves, pool, queue if self.packing else None,
                                 self.max_new_tokens)
            self._decode_rows(gen, state, result)
        pool.release()

    def _decode_rows(self, gen: list[GenRequest], state: "DecodingRows", result: BatchResult):
        generated = {i: [] for row in state.leaves for i in row}
        margins = {i: math.inf for i in generated}  # per leaf: its smallest top-2 gap so far
        logits = state.first_logits
        while True:
            still = self._judge(gen, state.leaves, state.active, logits, generated, margins,
                                result)
            # Rows that are done take waiting groups: all of them at once (one copy, one
            # head call, one judge); a row whose new leaves all stop at once goes again.
            empty = state.refillable(still)
            while empty and (filled := state.refill(empty)):
                for row in filled:
                    generated.update({i: [] for i in state.leaves[row]})
                    margins.update({i: math.inf for i in state.leaves[row]})
                judged = self._judge(gen, [state.leaves[r] for r in filled],
                                     [state.active[r] for r in filled], state.first_logits,
                                     generated, margins, result)
                for row, going in zip(filled, judged):
                    still[row] = going
                empty = [row for row in filled if not still[row]]
            if not any(still):
                return
            logits = state.step(still, result.stats)

    def _judge(self, gen, rows, active, logits, generated, margins,
               result) -> list[list[tuple[int, int]]]:
        """Take each active leaf's next token (first maximum on ties); per row, (leaf slot,
        token) of the leaves that go on. Finished leaves get their result, with the
        smallest gap between the chosen and the runner-up token over their steps (the
        logits are fp32, and a logit gap is the log-softmax gap)."""
        # One read-back per step (a synchronisation on CUDA): the chosen tokens and the
        # top-2 gaps travel together (token ids < 2**53 are exact in float64, the fp32 gaps
        # too), not in two transfers.
        top = logits.topk(min(2, logits.shape[-1]), dim=-1).values
        gap = (top[:, 0] - top[:, -1] if top.shape[-1] > 1
               else torch.full_like(top[:, 0], math.inf))
        tokens, gaps = torch.stack([logits.argmax(dim=-1).double(), gap.double()]).tolist()
        next_tokens, gaps = iter(map(int, tokens)), iter(gaps)
        still = []
        for row, slots in zip(rows, active):
            going = []
            for slot in slots:
                index, token = row[slot], next(next_tokens)
                margins[index] = min(margins[index], next(gaps))
                stop = self._stop_reason(gen[index], generated[index], token)
                if stop is None:
                    going.append((slot, token))
                else:
                    tokens = generated.pop(index)
                    result.generations[gen[index].key] = GenResult(
                        self._text(tokens), len(tokens), stop, margins.pop(index))
            still.append(going)
        return still

    def _stop_reason(self, request: GenRequest, tokens: list[int], token: int) -> str | None:
        return stop_reason(request, tokens, token, self.eos_ids, self.max_new_tokens, self._text)

    def _text(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)
