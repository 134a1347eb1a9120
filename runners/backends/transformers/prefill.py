"""Prefill's pieces: the state a node leaves, fragments (a row of a prefill call), how
fragments are cut into calls, and the scored positions waiting for the output head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from runners.plan.prefix_tree import Node

FORWARD_OVERHEAD_TOKENS = 64  # a call's fixed cost in padded tokens (reading the weights)


@dataclass
class NodeState:
    """What prefill leaves at a node: its path's pool slots, the features of its last
    position, and its path's logprob parts (NaN tensors, or spans in the pending head
    batch)."""

    slots: torch.Tensor
    last: torch.Tensor | None
    parts: list


@dataclass
class Fragment:
    """A row of a prefill call: a node and part of its subtree, on its parent's prefix."""

    prefix: NodeState  # the state of the root's parent (empty for a tree root)
    members: list  # (node, parent node or None for the root), depth first
    size: int  # tokens of the members
    deferred: list  # (node, parent node): children left for the next round


class PendingLogprobs:
    """Scored positions collected during prefill, sent through the output head at once.
    Siblings share their parent's last position: its row goes through the head once."""

    CHUNK_ROWS = 128  # bounds the logits in memory: 128 x vocabulary floats

    def __init__(self):
        self.rows: list[torch.Tensor] = []  # blocks of distinct rows
        self.row_count = 0
        # id(a parent's last features) -> (its row, the tensor: held so the id stays its own)
        self.shared_rows: dict[int, tuple[int, torch.Tensor]] = {}
        self.row_of: list[int] = []  # per target: its row
        self.targets: list[int] = []
        self.spans: list[tuple[int, int, bool]] = []  # (first target, count, lead NaN)

    def _add_rows(self, rows: torch.Tensor) -> int:
        self.rows.append(rows)
        self.row_count += len(rows)
        return self.row_count - len(rows)

    def add(self, rows: torch.Tensor, targets: list[int], lead_nan: bool,
            shared_first: torch.Tensor | None = None) -> int:
        """targets[k] is predicted by row k, or, with shared_first, targets[0] by that row
        (a parent's last features, added once however many children score from it) and
        targets[k] by rows[k - 1]."""
        self.spans.append((len(self.targets), len(targets), lead_nan))
        if shared_first is not None:
            key = id(shared_first)
            if key not in self.shared_rows:
                self.shared_rows[key] = (self._add_rows(shared_first[None]), shared_first)
            self.row_of.append(self.shared_rows[key][0])
        first = self._add_rows(rows)
        self.row_of.extend(range(first, first + len(rows)))
        self.targets.extend(targets)
        return len(self.spans) - 1

    def resolve(self, head: Callable[[torch.Tensor], torch.Tensor]) -> list[torch.Tensor]:
        """log P(target | prefix) per added span (NaN first when lead_nan)."""
        if not self.spans:
            return []
        rows = torch.cat(self.rows)
        row_of = torch.tensor(self.row_of, device=rows.device)
        targets = torch.tensor(self.targets, device=rows.device)
        logprobs = torch.empty(len(targets), dtype=torch.float32, device=rows.device)
        for start in range(0, len(rows), self.CHUNK_ROWS):
            logits = head(rows[start:start + self.CHUNK_ROWS])
            mine = ((row_of >= start) & (row_of < start + len(logits))).nonzero()[:, 0]
            local = row_of[mine] - start
            # log-softmax at the targets only: no vocabulary-sized output
            logprobs[mine] = (logits[local, targets[mine]]
                              - torch.logsumexp(logits, dim=-1)[local]).float()
        logprobs = logprobs.cpu()
        nan = torch.tensor([float("nan")])
        return [torch.cat([nan, logprobs[first:first + count]]) if lead_nan
                else logprobs[first:first + count] for first, count, lead_nan in self.spans]


def node_state(node: Node, parent: NodeState, own_slots: torch.Tensor,
               features: torch.Tensor, pending: PendingLogprobs) -> NodeState:
    """A node's state from its parent's and the features of its forwarded tokens (all of
    its segment but the last when node.trim_last)."""
    n = len(node.segment)
    if n == 0:  # a request ending where others go on: its parent's state exactly
        return parent
    scoring = features if node.trim_last else features[:-1]  # rows predicting tokens 2..n
    if not node.needs_logprobs:
        part = torch.full((n,), float("nan"))
    elif parent.last is None:  # a root's first token has no prediction; never scored
        part = pending.add(scoring.clone(), node.segment[1:], lead_nan=True)
    else:
        part = pending.add(scoring.clone(), node.segment, lead_nan=False,
                           shared_first=parent.last)
    last = None if node.trim_last else features[-1].clone()
    return NodeState(torch.cat([parent.slots, own_slots]), last, parent.parts + [part])


def forward_groups(fragments: list[Fragment], max_slots: int) -> list[list[Fragment]]:
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
