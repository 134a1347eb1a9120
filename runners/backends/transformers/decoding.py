"""Decoding rows: generation leaves grouped under shared prefixes, one cache row per group,
one model call per step for every going leaf, and finished rows refilled from a queue."""

from __future__ import annotations

from collections import deque
import torch

from runners.backends.transformers.kv_pool import KVPool
from runners.backends.transformers.model_calls import ModelCalls, to_device
from runners.backends.transformers.prefill import NodeState
from runners.plan.score_types import ScoreStats

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


def decode_order(group: tuple[list[int], torch.Tensor]) -> tuple[int, int]:
    """Queue order of decoding groups: most leaves first, then longest keys. Rows decoded
    together then carry about as many queries each, so a step pads few of them (sorted by
    keys alone, a call's rows averaged a third padding; by leaves first, a 12-item grid spent
    ~14% less time decoding: docs/runner.md)."""
    leaves, keys = group
    return -len(leaves), -len(keys)


def take_rows(queue: deque, max_slots: int, max_new_tokens: int) -> list:
    """Groups off the front of `queue` while the rows, padded to the longest taken keys plus
    room for new tokens (twice a row's worth: refilled rows add theirs later), fit
    max_slots; at least one."""
    room = decode_room(DECODE_GROUP_LEAVES, max_new_tokens, refills=True)
    taken = [queue.popleft()]
    width = len(taken[0][1])
    while queue and (len(taken) + 1) * (max(width, len(queue[0][1])) + room) <= max_slots:
        width = max(width, len(queue[0][1]))
        taken.append(queue.popleft())
    return taken


def decode_room(leaves: int, max_new_tokens: int, refills: bool) -> int:
    """Key columns a decoding batch appends, at most, before a row is refilled: one per
    leaf per step; twice that with refills (refilled rows add theirs later, and the cache
    grows past it)."""
    return leaves * max_new_tokens * (2 if refills else 1)


def common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    length = min(len(a), len(b))
    differ = (a[:length] != b[:length]).nonzero()
    return int(differ[0]) if len(differ) else length


class DecodingRows:
    """One decoding call's rows: a cache of the rows' keys (gathered from the pool,
    left-padded), which of them each leaf sees, and the leaves still going. With a queue of
    waiting groups (tree masks only), a finished row is refilled in place.

    What a step needs beside the cache lives on the model's device, in buffers with room
    (like the cache's RoomyLayers): `visible` [rows, leaf slot, keys] (which keys each leaf
    sees), `key_positions` [rows, keys], `lengths` and `fed` per leaf. A step sends one
    small index tensor (row, query, leaf slot, token per going leaf) and builds its ids,
    positions and mask there: no per-row Python tensor work, no mask built on the host, no
    copy of the whole visibility per step."""

    def __init__(self, calls: ModelCalls, groups, leaves: dict[int, NodeState], pool: KVPool,
                 queue: deque | None, max_new_tokens: int):
        self.calls, self.leaves_by_index, self.pool, self.queue = calls, leaves, pool, queue
        # A queue of waiting groups comes only with tree masks (grouped rows need them).
        self.tree_masks = queue is not None
        self.leaves = [group for group, _ in groups]  # per row: request indices
        self.active = [list(range(len(group))) for group in self.leaves]
        count, width = len(groups), max(len(keys) for _, keys in groups)
        most = DECODE_GROUP_LEAVES if queue is not None else max(map(len, self.leaves))
        gather = torch.zeros(count, width, dtype=torch.long)
        visible = torch.zeros(count, most, width, dtype=torch.bool)
        lengths = torch.zeros(count, most, dtype=torch.long)
        for r, (group, keys) in enumerate(groups):
            pad = width - len(keys)
            gather[r, pad:] = keys
            visible[r, :, pad:], lengths[r] = self._see(group, keys, most)
        # Room for every step's tokens (what take_rows budgets): growing the cache copies
        # all of it, and was a tenth of decoding's time with room for four steps.
        device, room = calls.device, decode_room(most, max_new_tokens, queue is not None)
        self.keys = width  # key columns in use (the cache's length)
        self.visible = torch.zeros(count, most, width + room, dtype=torch.bool, device=device)
        self.visible[:, :, :width] = to_device(visible, device)
        self.key_positions = torch.zeros(count, width + room, dtype=torch.long, device=device)
        self.key_positions[:, :width] = to_device(pool.positions[gather], device)
        self.lengths = to_device(lengths, device)
        self.fed = torch.zeros(count, most, dtype=torch.long, device=device)  # per leaf
        # The host's bound on the next query position (a leaf advances one per step):
        # the sliding-window test needs no read-back from the device.
        self.top_position = int(lengths.max())
        self.cache = pool.gather(gather, room=room)
        self.first_logits = self._first_logits(self.leaves)
        self._forget(self.leaves)

    def _see(self, group: list[int], keys: torch.Tensor, most: int):
        """(visible [most, len(keys)], lengths [most]) of a row's leaves, on the host."""
        visible = torch.zeros(most, len(keys), dtype=torch.bool)
        lengths = torch.zeros(most, dtype=torch.long)
        for slot, index in enumerate(group):
            path = self.leaves_by_index[index].slots
            visible[slot, torch.searchsorted(keys, path)] = True
            lengths[slot] = len(path)
        return visible, lengths

    def _first_logits(self, rows: list[list[int]]) -> torch.Tensor:
        return self.calls.head(torch.stack([self.leaves_by_index[i].last
                                              for row in rows for i in row]))

    def _forget(self, rows: list[list[int]]) -> None:
        for row in rows:
            for index in row:
                del self.leaves_by_index[index]

    def _room(self, extra: int) -> None:
        """Make room for `extra` more key columns (growing by a quarter, at least 64)."""
        capacity = self.visible.shape[2]
        if self.keys + extra <= capacity:
            return
        capacity = self.keys + extra + max(64, self.keys // 4)
        visible = self.visible.new_zeros(*self.visible.shape[:2], capacity)
        visible[:, :, :self.keys] = self.visible[:, :, :self.keys]
        positions = self.key_positions.new_zeros(self.key_positions.shape[0], capacity)
        positions[:, :self.keys] = self.key_positions[:, :self.keys]
        self.visible, self.key_positions = visible, positions

    def refillable(self, still: list[list]) -> list[int]:
        return [r for r, going in enumerate(still) if not going] if self.queue else []

    def refill(self, rows: list[int]) -> list[int]:
        """Put the next waiting groups into finished rows `rows`, one each in order, while a
        group waits and fits (its keys first, masked padding after, its new tokens appended
        where every row's are); the rows refilled. All of them with one copy from the pool
        per layer and one head call for their leaves' first logits (`first_logits`, in the
        order of the rows returned)."""
        length, device = self.cache.get_seq_length(), self.calls.device
        filled, slots = [], []
        for r in rows:
            if not self.queue or len(self.queue[0][1]) > length:
                break
            group, keys = self.queue.popleft()
            row_slots = torch.zeros(length, dtype=torch.long)
            row_slots[:len(keys)] = keys
            visible, lengths = self._see(group, keys, self.visible.shape[1])
            self.visible[r] = False
            self.visible[r, :, :len(keys)] = to_device(visible, device)
            self.lengths[r] = to_device(lengths, device)
            self.fed[r] = 0
            self.top_position = max(self.top_position, int(lengths.max()))
            self.key_positions[r, :self.keys] = to_device(self.pool.positions[row_slots],
                                                          device)
            self.leaves[r], self.active[r] = group, list(range(len(group)))
            filled.append(r)
            slots.append(row_slots)
        if filled:
            self.pool.fill_rows(self.cache, filled, torch.stack(slots))
            groups = [self.leaves[r] for r in filled]
            self.first_logits = self._first_logits(groups)
            self._forget(groups)
        if not self.queue:
            self.pool.release()
        return filled

    def step(self, going: list[list[tuple[int, int]]], stats: ScoreStats):
        """Feed each going leaf its token; the logits of the next, in row order."""
        calls, device = self.calls, self.calls.device
        keep = [r for r, row in enumerate(going) if row]
        if len(keep) < len(going):
            self.cache.batch_select_indices(torch.tensor(keep))  # on the host: no sync
            kept = to_device(torch.tensor(keep), device)
            self.visible, self.lengths = self.visible[kept], self.lengths[kept]
            self.fed, self.key_positions = self.fed[kept], self.key_positions[kept]
            self.leaves = [self.leaves[r] for r in keep]
            going = [going[r] for r in keep]
        count, width = len(going), max(len(row) for row in going)
        entries = to_device(torch.tensor([(r, q, slot, token) for r, row in enumerate(going)
                                          for q, (slot, token) in enumerate(row)],
                                         dtype=torch.long), device)
        row_index, query, leaf, token = entries.unbind(1)
        ids = torch.zeros(count, width, dtype=torch.long, device=device)
        ids[row_index, query] = token
        query_leaf = torch.zeros(count, width, dtype=torch.long, device=device)
        query_leaf[row_index, query] = leaf
        real = torch.zeros(count, width, dtype=torch.bool, device=device)
        real[row_index, query] = True
        rows = torch.arange(count, device=device)[:, None]
        positions = torch.where(real, self.lengths[rows, query_leaf] + self.fed[rows, query_leaf], 0)
        keys = self.keys
        seen = self.visible[rows, query_leaf, :keys] & real[:, :, None]  # [rows, queries, keys]
        self._room(width)
        self.key_positions[:, keys:keys + width] = positions
        key_positions = self.key_positions[:, :keys + width]
        if self.tree_masks:
            own = torch.eye(width, dtype=torch.bool, device=device).expand(count, width, width)
            mask = calls.tree_mask(torch.cat([seen, own], dim=2), positions, key_positions,
                                   self.top_position)
        else:  # one leaf per row: a key-padding mask says it all
            mask = torch.cat([seen[:, 0], real], dim=1).long()
        # The real queries' features by index (row-major, as `entries` lists them), not by
        # the boolean mask `real`: a mask index makes the host wait for the device to count
        # its elements, a second synchronisation in every step on CUDA.
        hidden = calls.forward(ids, mask, positions, self.cache)
        features = hidden.reshape(count * width, *hidden.shape[2:])[row_index * width + query]
        # Each leaf sees its own new token from now on.
        self.visible[:, :, keys:keys + width] = False
        self.visible[row_index, leaf, keys + query] = True
        self.fed[row_index, leaf] += 1
        self.top_position += 1
        self.keys = keys + width
        self.active = [[slot for slot, _ in row] for row in going]
        stats.decode_calls += 1
        stats.decode_tokens += len(entries)
        stats.decode_padding += count * width - len(entries)
        return calls.head(features)
