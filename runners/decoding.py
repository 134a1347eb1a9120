"""Decoding rows: generation leaves grouped under shared prefixes, one cache row per group,
one model call per step for every going leaf, and finished rows refilled from a queue."""

from __future__ import annotations

from collections import deque
import torch

from runners.kv_pool import KVPool
from runners.model_calls import ModelCalls
from runners.prefill import NodeState
from runners.score_types import ScoreStats

DECODE_GROUP_LEAVES = 4  # generation leaves sharing one decoding row (tree masks only)
DECODE_GROUP_KEYS = 512  # prompt tokens of a decoding row before a new one starts


def decode_groups(leaves: dict[int, NodeState], limit: int) -> list[tuple[list[int], torch.Tensor]]:
    """(leaf indices, their keys' pool slots, ascending) per decoding row: consecutive
    leaves in tree order, at most `limit`, while their union of prompt tokens stays small."""
    groups, members, keys, previous = [], [], 0, None
    for index in sorted(leaves, key=lambda i: leaves[i].slots.tolist()):
        path = leaves[index].slots
        grown = keys + len(path) - (common_prefix(previous, path) if members else 0)
        if members and (len(members) >= limit or grown > max(DECODE_GROUP_KEYS, len(path))):
            groups.append(members)
            members, grown = [], len(path)
        members.append(index)
        keys, previous = grown, path
    if members:
        groups.append(members)
    return [(group, torch.unique(torch.cat([leaves[i].slots for i in group])))
            for group in groups]



def take_rows(queue: deque, max_slots: int, max_new_tokens: int) -> list:
    """Groups off the front of `queue` (longest keys first) while the rows, padded to the
    first one's keys plus room for new tokens (twice a row's worth: refilled rows add theirs
    later), fit max_slots; at least one."""
    width = len(queue[0][1]) + 2 * DECODE_GROUP_LEAVES * max_new_tokens
    taken = [queue.popleft()]
    while queue and (len(taken) + 1) * width <= max_slots:
        taken.append(queue.popleft())
    return taken


def common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    length = min(len(a), len(b))
    differ = (a[:length] != b[:length]).nonzero()
    return int(differ[0]) if len(differ) else length


class DecodingRows:
    """One decoding call's rows: a cache of the rows' keys (gathered from the pool,
    left-padded), which of them each leaf sees, and the leaves still going. With a queue of
    waiting groups (tree masks only), a finished row is refilled in place."""

    def __init__(self, calls: ModelCalls, groups, leaves: dict[int, NodeState], pool: KVPool,
                 queue: deque | None):
        self.calls, self.leaves_by_index, self.pool, self.queue = calls, leaves, pool, queue
        # A queue of waiting groups comes only with tree masks (grouped rows need them).
        self.tree_masks = queue is not None
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
        return self.calls.head(torch.stack([self.leaves_by_index[i].last
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
        calls = self.calls
        keep = [r for r, row in enumerate(going) if row]
        if len(keep) < len(going):
            kept = torch.tensor(keep)
            self.cache.batch_select_indices(kept.to(calls.device))
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
        if self.tree_masks:
            mask = calls.tree_mask(torch.cat([seen, own], dim=2), positions, key_positions)
        else:  # one leaf per row: a key-padding mask says it all
            mask = torch.cat([seen[:, 0], real], dim=1).long().to(calls.device)
        features = calls.forward(ids, mask, positions, self.cache)[real.to(calls.device)]
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
        return calls.head(features)
