"""Scoring core: log-likelihoods and greedy generation over a prefix tree of prompts, in
batched forwards.

Prefill goes level by level. Every token sequence of a batch (24 generation prompts and
2 x 4 cloze sequences per item, many items) is a path in one token radix tree
(runners.prefix_tree). The tree is forwarded one depth at a time: all nodes of a depth
(the chat headers, then every item's question stem, then every option block, then the cloze
continuations) go through the decoder together, one row per node, right-padded. Each row
attends to its parent's prefix, whose keys and values are gathered from a pool that holds
every forwarded token of the batch once. So each unique token is forwarded once, the KV
memory of a batch grows with its unique tokens (not with the sum of prompt lengths), and a
forward carries many rows: a forward reads every weight once, so rows are what fill a
CPU's or a GPU's matrix units (batch-1 forwards of a few tokens ran at ~15% of the dense
rate on this project's CPU).

A row's cache is [its prefix, left-padded][its segment, right-padded]: real tokens stay
contiguous, so causal masks and sliding windows see true distances; position ids are
explicit, and only standard 2D attention masks are used, so any transformers decoder works.

Decoding: the generation leaves decode together in chunks bounded by the KV budget: each
chunk's prompts are gathered from the pool into one left-padded cache, rows advance one
token per step, and a row leaves as soon as its answer is decided (parser.is_decided), it
emits EOS, or it reaches max_new_tokens. The pool is released once the last chunk has its
cache.

The budget (`max_slots`): no forward holds more than that many KV positions (rows x padded
length); the run loop (runners.batching) sizes batches with the same number and halves it
on out-of-memory.

The output head (vocabulary projection) runs apart from the decoder: prefill keeps hidden
states, and the head is applied once per batch to the rows that need logits (scored cloze
positions, the last position of each generation prompt). Models whose head cannot be split
off this way (checked on a probe at construction) get full-model logits instead.

Likelihood requests follow lm-evaluation-harness: the request's tokens are the encoding of
context + continuation; scored tokens are those after the context's own encoding length; the
score is the sum of their log-softmax. Results do not depend on batch composition, budget or
prefix reuse beyond float rounding (tests/runners check all three).
"""

from __future__ import annotations

import inspect
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Hashable

import torch

from runners.prefix_tree import Node, build_tree, count_tokens, mark_logprob_nodes

DEFAULT_MAX_SLOTS = 16384  # KV positions one decoder call may hold (runners.batching sets it)
DEFAULT_PACK_TOKENS = 256  # tokens of one packed prefill row (a fragment of the tree)
FORWARD_OVERHEAD_TOKENS = 64  # a call's fixed cost in padded tokens (reading the weights)
DECODE_GROUP_LEAVES = 4  # generation leaves sharing one decoding row (tree masks only)
DECODE_GROUP_KEYS = 512  # prompt tokens of a decoding row before a new one starts


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


class KVPool:
    """Keys and values of every token forwarded in a batch, each once.

    Per layer a tensor [slots, kv heads, head dim] on that layer's device (so a model
    sharded across GPUs keeps each layer's pool beside it). Slot 0 stays zero: it is what
    padding gathers. Layers that keep no cache of their own (KV sharing) stay None."""

    def __init__(self, capacity: int):
        self.capacity = capacity + 1
        self.used = 1
        self.keys: list[torch.Tensor | None] = []
        self.values: list[torch.Tensor | None] = []
        self.positions = torch.zeros(self.capacity, dtype=torch.long)  # logical, per slot

    def allocate(self, count: int, start: int) -> torch.Tensor:
        """`count` fresh slots for tokens at logical positions start, start + 1, ..."""
        if self.used + count > self.capacity:
            raise RuntimeError("KV pool overflow: more tokens than the tree holds")
        slots = torch.arange(self.used, self.used + count)
        self.positions[slots] = torch.arange(start, start + count)
        self.used += count
        return slots

    def release(self) -> None:
        self.keys.clear()
        self.values.clear()

    def gather(self, index: torch.Tensor, room: int):
        """A cache whose row r holds the slots index[r] (shape [rows, length]), with room
        for `room` more positions per row before it has to grow."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        rows, length = index.shape
        flat = index.reshape(-1)
        layers = []
        for keys, values in zip(self.keys, self.values):
            if keys is None:  # a layer that reads another layer's cache
                layers.append(DynamicLayer())
                continue
            at = flat.to(keys.device)
            layers.append(_RoomyLayer(*(t.index_select(0, at).view(rows, length, *t.shape[1:])
                                        .transpose(1, 2) for t in (keys, values)), room))
        cache = DynamicCache()
        cache.layers = layers
        return cache

    def store(self, cache, offset: int, rows: torch.Tensor, cols: torch.Tensor,
              slots: torch.Tensor) -> None:
        """Copy cache positions (rows[i], offset + cols[i]) into pool slots[i]."""
        if not self.keys:
            self._allocate_like(cache)
        for layer, keys, values in zip(cache.layers, self.keys, self.values):
            if keys is None:
                continue
            r, c, s = (t.to(keys.device) for t in (rows, cols + offset, slots))
            keys[s] = layer.keys[r, :, c]
            values[s] = layer.values[r, :, c]

    def _allocate_like(self, cache) -> None:
        for layer in cache.layers:
            if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
                self.keys.append(None)
                self.values.append(None)
                continue
            for source, pool in ((layer.keys, self.keys), (layer.values, self.values)):
                _, heads, _, dim = source.shape
                pool.append(torch.zeros(self.capacity, heads, dim, dtype=source.dtype,
                                        device=source.device))

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values
                   if t is not None)


def _roomy_layer_class():
    from transformers.cache_utils import DynamicLayer

    class RoomyLayer(DynamicLayer):
        """A DynamicLayer that appends in place into a buffer with spare room (growing by a
        quarter when full): DynamicLayer concatenates, copying a row's whole cache at every decoding
        step, which dominated decoding on a CPU."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: int):
            super().__init__()
            self.is_initialized, self.device = True, keys.device
            self.length = keys.shape[-2]
            self._keys = self._buffer(keys, self.length + max(room, 1))
            self._values = self._buffer(values, self.length + max(room, 1))
            self._views()

        @staticmethod
        def _buffer(states: torch.Tensor, capacity: int) -> torch.Tensor:
            buffer = states.new_zeros(*states.shape[:-2], capacity, states.shape[-1])
            buffer[..., :states.shape[-2], :] = states
            return buffer

        def _views(self) -> None:
            self.keys = self._keys[..., :self.length, :]
            self.values = self._values[..., :self.length, :]

        def update(self, key_states, value_states, *args, **kwargs):
            count = key_states.shape[-2]
            if self.length + count > self._keys.shape[-2]:
                capacity = self.length + count + max(64, self.length // 4)
                self._keys = self._buffer(self.keys, capacity)
                self._values = self._buffer(self.values, capacity)
            self._keys[..., self.length:self.length + count, :] = key_states
            self._values[..., self.length:self.length + count, :] = value_states
            self.length += count
            self._views()
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

        def replace_row(self, row: int, keys: torch.Tensor, values: torch.Tensor) -> None:
            """Row `row` becomes keys/values ([heads, length, dim], length = this layer's)."""
            self._keys[row, :, :self.length] = keys
            self._values[row, :, :self.length] = values

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            indices = indices.to(self._keys.device)  # layers of a sharded model differ
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._views()

    return RoomyLayer


def _RoomyLayer(keys: torch.Tensor, values: torch.Tensor, room: int):
    """Built lazily: transformers is imported only when a model scores."""
    global _ROOMY_LAYER
    if _ROOMY_LAYER is None:
        _ROOMY_LAYER = _roomy_layer_class()
    return _ROOMY_LAYER(keys, values, room)


_ROOMY_LAYER = None


@dataclass
class _State:
    """What prefill leaves at a node: its path's pool slots, the features of its last
    position, and its path's logprob parts (NaN tensors, or spans in the pending head
    batch)."""

    slots: torch.Tensor
    last: torch.Tensor | None
    parts: list


@dataclass
class _Fragment:
    """A row of a prefill call: a node and part of its subtree, on its parent's prefix."""

    prefix: _State  # the state of the root's parent (empty for a tree root)
    members: list  # (node, parent node or None for the root), depth first
    size: int  # tokens of the members
    deferred: list  # (node, parent node): children left for the next round


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
        if self.device.type == "cpu":
            # Masked attention on a CPU: let SDPA read the shared KV heads itself rather than
            # have transformers copy them once per query head (a third of decoding time for
            # SmolLM2). On CUDA a mask with GQA would fall back to the math kernel: not there.
            os.environ.setdefault("TRANSFORMERS_SDPA_FORCE_GQA", "1")
        dtype = getattr(model, "dtype", torch.float32)
        self._mask_dtype = dtype if dtype.is_floating_point else torch.float32
        self._cache_kw = _cache_keyword(model)
        self._backbone, self._head = _split_output_head(model, self._cache_kw, self.device)
        self.kv_bytes_per_token = _kv_bytes_per_token(model, self._cache_kw, self.device)
        self._layer_types, self._sliding_window, self.packing = _attention_layout(model.config)
        if self.packing and pack_tokens > 0:
            self.packing = self._tree_masks_work()
        self.packing = self.packing and pack_tokens > 0

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
        try:
            got = self.score([], requests).loglikelihoods
        except Exception:  # an attention implementation that rejects custom masks
            return False
        for request in requests:
            ids = torch.tensor([request.tokens], device=self.device)
            logprobs = torch.log_softmax(self.model(input_ids=ids).logits[0].float(), dim=-1)
            expected = float(logprobs[torch.arange(len(request.tokens) - 1),
                                      ids[0, 1:]].sum())
            if abs(got[request.key][0] - expected) > 1e-3 * max(1.0, abs(expected)):
                return False
        return True

    # -- public -------------------------------------------------------------------------

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
        result = BatchResult()
        result.stats.unique_prompt_tokens = count_tokens(build_tree(sequences, share=True))
        result.stats.total_prompt_tokens = sum(map(len, sequences))
        pool = KVPool(count_tokens(roots))
        pending = _PendingLogprobs()
        leaves: dict[int, _State] = {}
        paths: dict[int, list] = {}  # likelihood request index -> its path's logprob parts
        self._prefill(roots, pool, pending, max_slots, len(gen), leaves, paths, result.stats)
        scored = pending.resolve(self._head)
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
        empty = _State(torch.zeros(0, dtype=torch.long), None, [])
        states: dict[int, _State] = {}  # id(node) -> its state, once forwarded
        starts = [(root, None) for root in roots]  # fragment roots with their parent node
        while starts:
            fragments = [self._fragment(node, states[id(parent)] if parent else empty)
                         for node, parent in starts]
            for group in _forward_groups(fragments, max_slots):
                self._forward_fragments(group, pool, pending, states, stats)
            for node, _ in (pair for fragment in fragments for pair in fragment.members):
                state = states[id(node)]
                for index in node.requests:
                    if index < n_gen:
                        leaves[index] = _State(state.slots, state.last, [])
                    else:
                        paths[index] = state.parts
            starts = [pair for fragment in fragments for pair in fragment.deferred]

    def _fragment(self, root: Node, prefix: "_State") -> "_Fragment":
        """`root` and, when packing, as much of its subtree (depth first, each node after
        its parent) as fits in pack_tokens; a node that does not fit starts a fragment of
        the next round. Empty-segment nodes (a request ending where others go on) always
        come along."""
        members, size, deferred = [(root, None)], len(root.segment), []
        stack = [(child, root) for child in reversed(root.children)]
        while stack:
            node, parent = stack.pop()
            if not node.segment or (self.packing and size + len(node.segment) <= self.pack_tokens):
                members.append((node, parent))
                size += len(node.segment)
                stack.extend((child, node) for child in reversed(node.children))
            else:
                deferred.append((node, parent))
        return _Fragment(prefix, members, size, deferred)

    def _forward_fragments(self, fragments: list["_Fragment"], pool: KVPool,
                           pending: _PendingLogprobs, states: dict, stats: ScoreStats):
        """One decoder call, a row per fragment: [its prefix, gathered from the pool and
        left-padded][its nodes' tokens, depth first, right-padded]."""
        count = len(fragments)
        prefix_len = max(len(f.prefix.slots) for f in fragments)
        width = max(f.size for f in fragments)
        ids = torch.zeros(count, width, dtype=torch.long)
        positions = torch.zeros(count, width, dtype=torch.long)
        gather = torch.zeros(count, prefix_len, dtype=torch.long)  # slot 0: zero padding
        member_of = torch.full((count, width), -1, dtype=torch.long)  # -1: padding
        visible_members = []  # per member (numbered across the call): itself + ancestors
        placed = []  # per member: (row, offset, its pool slots)
        for r, fragment in enumerate(fragments):
            p = len(fragment.prefix.slots)
            gather[r, prefix_len - p:] = fragment.prefix.slots
            offset, number = 0, {}
            for node, parent in fragment.members:
                n, g = len(node.segment), len(placed)
                number[id(node)] = g
                visible_members.append((visible_members[number[id(parent)]] if parent else [])
                                       + [g])
                placed.append((r, offset, pool.allocate(n, node.start)))
                ids[r, offset:offset + n] = torch.tensor(node.segment, dtype=torch.long)
                positions[r, offset:offset + n] = torch.arange(node.start, node.start + n)
                member_of[r, offset:offset + n] = g
                offset += n
            # Padding repeats the last real position: never past what the model supports.
            positions[r, offset:] = positions[r, offset - 1]
        prefix_real = torch.arange(prefix_len)[None] >= (prefix_len - torch.tensor(
            [len(f.prefix.slots) for f in fragments]))[:, None]
        mask = self._prefill_mask(member_of, visible_members, prefix_real,
                                  pool.positions[gather], positions)
        if prefix_len:
            cache = pool.gather(gather, room=width)
        else:
            from transformers import DynamicCache

            cache = DynamicCache()
        out = self._backbone(input_ids=ids.to(self.device), attention_mask=mask,
                             position_ids=positions.to(self.device), use_cache=True,
                             **{self._cache_kw: cache})
        features = self._features(out)
        real = member_of >= 0
        rows, cols = real.nonzero(as_tuple=True)  # row-major: members in placement order
        pool.store(cache, prefix_len, rows, cols, torch.cat([s for _, _, s in placed]))
        del cache, out
        stats.prefill_calls += 1
        stats.prompt_tokens += int(real.sum())
        stats.prompt_padding += int((~real).sum())
        g = 0
        for fragment in fragments:
            for node, parent in fragment.members:
                r, offset, own_slots = placed[g]
                parent_state = states[id(parent)] if parent else fragment.prefix
                states[id(node)] = _node_state(node, parent_state, own_slots,
                                               features[r, offset:offset + len(node.segment)],
                                               pending)
                g += 1

    def _prefill_mask(self, member_of, visible_members, prefix_real, key_positions,
                      positions):
        """The attention mask of a prefill call: 2D (key padding) when every row is one
        path, else a 4D tree mask: each token sees its row's prefix, its ancestors' tokens
        and its own earlier tokens."""
        real = member_of >= 0
        if not self.packing:
            return torch.cat([prefix_real, real], dim=1).long().to(self.device)
        width = member_of.shape[1]
        padding = len(visible_members)
        allowed = torch.zeros(padding + 1, padding + 1, dtype=torch.bool)
        for g, members in enumerate(visible_members):
            allowed[g, members] = True
        allowed[padding, padding] = True  # a padding position sees padding: never all-masked
        index = torch.where(real, member_of, padding)
        packed = allowed[index[:, :, None], index[:, None, :]] & torch.ones(
            width, width, dtype=torch.bool).tril()
        visible = torch.cat([prefix_real[:, None, :] & real[:, :, None], packed], dim=2)
        return self._tree_mask(visible, positions, torch.cat([key_positions, positions], dim=1))

    # -- decoding -----------------------------------------------------------------------

    def _decode(self, gen: list[GenRequest], leaves: dict[int, _State], pool: KVPool,
                max_slots: int, result: BatchResult):
        """Greedy decoding of every generation leaf. With tree masks, leaves are grouped (in
        tree order) into rows whose keys are the union of their prompts, so a row holds a
        shared prefix once, and a row whose leaves are all done takes the next waiting group
        (continuous batching: one call per step for the whole batch, however many rows the
        budget holds at once). Without tree masks a row is one prompt, decoded in chunks."""
        queue = deque(sorted(self._decode_groups(leaves), key=lambda group: -len(group[1])))
        while queue:
            state = _Decoding(self, _take_rows(queue, max_slots, self.max_new_tokens), leaves,
                              pool, queue if self.packing else None)
            self._decode_rows(gen, state, result)
        pool.release()

    def _decode_groups(self, leaves: dict[int, _State]) -> list[tuple[list[int], torch.Tensor]]:
        """(leaf indices, their keys' pool slots, ascending) per decoding row: consecutive
        leaves in tree order while their union of prompt tokens stays small."""
        limit = DECODE_GROUP_LEAVES if self.packing else 1
        groups, members, keys, previous = [], [], 0, None
        for index in sorted(leaves, key=lambda i: leaves[i].slots.tolist()):
            path = leaves[index].slots
            grown = keys + len(path) - (_common_prefix(previous, path) if members else 0)
            if members and (len(members) >= limit or grown > max(DECODE_GROUP_KEYS, len(path))):
                groups.append(members)
                members, grown = [], len(path)
            members.append(index)
            keys, previous = grown, path
        if members:
            groups.append(members)
        return [(group, torch.unique(torch.cat([leaves[i].slots for i in group])))
                for group in groups]

    def _decode_rows(self, gen: list[GenRequest], state: "_Decoding", result: BatchResult):
        generated = {i: [] for row in state.leaves for i in row}
        logits = state.first_logits
        while True:
            still = self._judge(gen, state.leaves, state.active, logits, generated, result)
            for row in state.refillable(still):  # rows that are done take waiting groups
                while not still[row] and state.refill(row):
                    generated.update({i: [] for i in state.leaves[row]})
                    still[row] = self._judge(gen, [state.leaves[row]], [state.active[row]],
                                             state.first_logits, generated, result)[0]
            if not any(still):
                return
            logits = state.step(still, result.stats)

    def _judge(self, gen, rows, active, logits, generated, result) -> list[list[tuple[int, int]]]:
        """Take each active leaf's next token (first maximum on ties); per row, (leaf slot,
        token) of the leaves that go on. Finished leaves get their result."""
        next_tokens = iter(logits.argmax(dim=-1).tolist())
        still = []
        for row, slots in zip(rows, active):
            going = []
            for slot in slots:
                index, token = row[slot], next(next_tokens)
                stop = self._stop_reason(gen[index], generated[index], token)
                if stop is None:
                    going.append((slot, token))
                else:
                    tokens = generated.pop(index)
                    result.generations[gen[index].key] = GenResult(
                        self._text(tokens), len(tokens), stop)
            still.append(going)
        return still

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

    # -- masks --------------------------------------------------------------------------

    def _tree_mask(self, visible: torch.Tensor, query_positions: torch.Tensor,
                   key_positions: torch.Tensor):
        """The additive 4D mask for `visible` [rows, queries, keys]; per layer type when a
        sliding window is shorter than these positions (windows count logical positions)."""
        masks = {"full_attention": visible}
        window = self._sliding_window
        if window is not None and int(query_positions.max()) >= window:
            near = query_positions[:, :, None] - key_positions[:, None, :] < window
            masks["sliding_attention"] = visible & near
        additive = {kind: self._additive(mask) for kind, mask in masks.items()}
        if len(additive) == 1:
            return additive["full_attention"]
        if self._layer_types is None:  # every layer slides
            return additive["sliding_attention"]
        return additive

    def _additive(self, visible: torch.Tensor) -> torch.Tensor:
        """[rows, 1, queries, keys]: 0 where visible, the dtype's minimum elsewhere."""
        dtype = self._mask_dtype
        mask = torch.zeros(visible.shape, dtype=dtype, device=self.device)
        mask.masked_fill_(~visible.to(self.device), torch.finfo(dtype).min)
        return mask[:, None]

    def _features(self, out) -> torch.Tensor:
        return out.last_hidden_state if self._backbone is not self.model else out.logits


class _Decoding:
    """One decoding call's rows: a cache of the rows' keys (gathered from the pool,
    left-padded), which of them each leaf sees, and the leaves still going. With a queue of
    waiting groups (tree masks only), a finished row is refilled in place."""

    def __init__(self, scorer: Scorer, groups, leaves: dict[int, _State], pool: KVPool,
                 queue: deque | None):
        self.scorer, self.leaves_by_index, self.pool, self.queue = scorer, leaves, pool, queue
        self.leaves = [group for group, _ in groups]  # per row: request indices
        self.active = [list(range(len(group))) for group in self.leaves]
        count, width = len(groups), max(len(keys) for _, keys in groups)
        most = DECODE_GROUP_LEAVES if queue is not None else max(map(len, self.leaves))
        gather = torch.zeros(count, width, dtype=torch.long)
        self.visible = torch.zeros(count, most, width, dtype=torch.bool)
        self.lengths = torch.zeros(count, most, dtype=torch.long)
        self.fed = torch.zeros(count, most, dtype=torch.long)  # tokens fed back per leaf
        for r, (group, keys) in enumerate(groups):
            pad = width - len(keys)
            gather[r, pad:] = keys
            self._see(r, group, keys, pad)
        self.key_positions = pool.positions[gather]
        # Room for a few tokens per leaf; the buffer grows for rows that ramble on.
        self.cache = pool.gather(gather, room=4 * most)
        self.first_logits = self._first_logits(self.leaves)
        self._forget(self.leaves)

    def _see(self, r: int, group: list[int], keys: torch.Tensor, offset: int) -> None:
        for slot, index in enumerate(group):
            path = self.leaves_by_index[index].slots
            self.visible[r, slot, torch.searchsorted(keys, path) + offset] = True
            self.lengths[r, slot] = len(path)

    def _first_logits(self, rows: list[list[int]]) -> torch.Tensor:
        return self.scorer._head(torch.stack([self.leaves_by_index[i].last
                                              for row in rows for i in row]))

    def _forget(self, rows: list[list[int]]) -> None:
        for row in rows:
            for index in row:
                del self.leaves_by_index[index]

    def refillable(self, still: list[list]) -> list[int]:
        return [r for r, going in enumerate(still) if not going] if self.queue else []

    def refill(self, r: int) -> bool:
        """Put the next waiting group into finished row r (its keys first, masked padding
        after, its new tokens appended where every row's are); False when none waits or it
        does not fit."""
        if not self.queue or len(self.queue[0][1]) > self.cache.get_seq_length():
            return False
        group, keys = self.queue.popleft()
        slots = torch.zeros(self.cache.get_seq_length(), dtype=torch.long)
        slots[:len(keys)] = keys
        fresh = self.pool.gather(slots[None], room=0)
        for layer, new in zip(self.cache.layers, fresh.layers):
            if hasattr(layer, "replace_row"):
                layer.replace_row(r, new.keys[0], new.values[0])
        self.visible[r] = False
        self.fed[r] = 0
        self.key_positions[r] = self.pool.positions[slots]
        self._see(r, group, keys, 0)
        self.leaves[r], self.active[r] = group, list(range(len(group)))
        self.first_logits = self._first_logits([group])
        self._forget([group])
        if not self.queue:
            self.pool.release()
        return True

    def step(self, going: list[list[tuple[int, int]]], stats: ScoreStats):
        """Feed each going leaf its token; the logits of the next, in row order."""
        scorer = self.scorer
        keep = [r for r, row in enumerate(going) if row]
        if len(keep) < len(going):
            kept = torch.tensor(keep)
            self.cache.batch_select_indices(kept.to(scorer.device))
            self.visible, self.lengths = self.visible[kept], self.lengths[kept]
            self.fed, self.key_positions = self.fed[kept], self.key_positions[kept]
            self.leaves = [self.leaves[r] for r in keep]
            going = [going[r] for r in keep]
        count, width = len(going), max(len(row) for row in going)
        ids = torch.zeros(count, width, dtype=torch.long)
        query_leaf = torch.zeros(count, width, dtype=torch.long)
        real = torch.zeros(count, width, dtype=torch.bool)
        for r, row in enumerate(going):
            for q, (slot, token) in enumerate(row):
                ids[r, q], query_leaf[r, q], real[r, q] = token, slot, True
        rows = torch.arange(count)[:, None]
        positions = torch.where(real, self.lengths[rows, query_leaf] + self.fed[rows, query_leaf], 0)
        seen = self.visible[rows, query_leaf] & real[:, :, None]  # [rows, queries, keys]
        own = torch.eye(width, dtype=torch.bool).expand(count, width, width)
        key_positions = torch.cat([self.key_positions, positions], dim=1)
        if scorer.packing:
            mask = scorer._tree_mask(torch.cat([seen, own], dim=2), positions, key_positions)
        else:  # one leaf per row: a key-padding mask says it all
            mask = torch.cat([seen[:, 0], real], dim=1).long().to(scorer.device)
        out = scorer._backbone(input_ids=ids.to(scorer.device), attention_mask=mask,
                               position_ids=positions.to(scorer.device), use_cache=True,
                               **{scorer._cache_kw: self.cache})
        features = scorer._features(out)[real.to(scorer.device)]
        # Each leaf sees its own new token from now on.
        row_index = rows.expand(count, width)[real]
        added = torch.zeros(count, self.visible.shape[1], width, dtype=torch.bool)
        added[row_index, query_leaf[real], torch.arange(width).expand(count, width)[real]] = True
        self.visible = torch.cat([self.visible, added], dim=2)
        self.fed[row_index, query_leaf[real]] += 1
        self.key_positions = key_positions
        self.active = [[slot for slot, _ in row] for row in going]
        stats.decode_calls += 1
        stats.decode_tokens += int(real.sum())
        stats.decode_padding += int((~real).sum())
        return scorer._head(features)


def _node_state(node: Node, parent: _State, own_slots: torch.Tensor,
                features: torch.Tensor, pending: _PendingLogprobs) -> _State:
    """A node's state from its parent's and the features of its own tokens."""
    n = len(node.segment)
    if n == 0:  # a request ending where others go on: its parent's state exactly
        return parent
    if not node.needs_logprobs:
        part = torch.full((n,), float("nan"))
    elif parent.last is None:  # a root's first token has no prediction; never scored
        part = pending.add(features[:-1].clone(), node.segment[1:], lead_nan=True)
    else:
        part = pending.add(torch.cat([parent.last[None], features[:-1]]), node.segment,
                           lead_nan=False)
    return _State(torch.cat([parent.slots, own_slots]), features[-1].clone(),
                  parent.parts + [part])


def _forward_groups(fragments: list[_Fragment], max_slots: int) -> list[list[_Fragment]]:
    """Fragments split into decoder calls: longest first, cut where the padding saved
    outweighs a call's fixed cost (an exact partition by dynamic programming), no call
    above max_slots KV positions unless it holds a single row."""
    order = sorted(fragments, key=lambda f: (-f.size, -len(f.prefix.slots)))
    best = [0.0] + [float("inf")] * len(order)
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        prefix = 0
        for start in range(end - 1, -1, -1):
            prefix = max(prefix, len(order[start].prefix.slots))
            rows = end - start
            if rows > 1 and rows * (prefix + order[start].size) > max_slots:
                break
            cost = best[start] + FORWARD_OVERHEAD_TOKENS + rows * order[start].size
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], len(order)
    while end:
        groups.append(order[cut[end]:end])
        end = cut[end]
    return groups[::-1]


def _take_rows(queue: deque, max_slots: int, max_new_tokens: int) -> list:
    """Groups off the front of `queue` (longest keys first) while the rows, padded to the
    first one's keys plus room for new tokens (twice a row's worth: refilled rows add theirs
    later), fit max_slots; at least one."""
    width = len(queue[0][1]) + 2 * DECODE_GROUP_LEAVES * max_new_tokens
    taken = [queue.popleft()]
    while queue and (len(taken) + 1) * width <= max_slots:
        taken.append(queue.popleft())
    return taken


def _common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    length = min(len(a), len(b))
    differ = (a[:length] != b[:length]).nonzero()
    return int(differ[0]) if len(differ) else length


def _attention_layout(config) -> tuple[list | None, int | None, bool]:
    """(layer types when mixed, the sliding window, whether tree masks can express the
    model's attention). Chunked or other attention kinds get one node per row instead."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    window = getattr(text, "sliding_window", None)
    layer_types = getattr(text, "layer_types", None)
    if layer_types:
        kinds = set(layer_types)
        if kinds - {"full_attention", "sliding_attention"}:
            return None, None, False
        if "sliding_attention" not in kinds:
            return None, None, True
        return (list(layer_types) if "full_attention" in kinds else None), window, True
    if getattr(text, "use_sliding_window", True) is False:
        window = None
    return None, window, True


def _cache_keyword(module) -> str:
    # transformers 5.x renames past_key_values to cache (the old name warns).
    params = inspect.signature(module.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _kv_bytes_per_token(model, cache_kw: str, device) -> int:
    """Bytes of keys and values one token adds to the cache, measured on a probe forward
    (so grouped-query attention, shared KV layers and the dtype count as they are)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    probe = torch.arange(1, 5, device=device)[None] % model.config.vocab_size
    with torch.no_grad():
        model(input_ids=probe, use_cache=True, **{cache_kw: cache})
    total = sum(t.numel() * t.element_size() for layer in cache.layers
                for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
                if t is not None)
    return max(1, total // probe.shape[1])


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
