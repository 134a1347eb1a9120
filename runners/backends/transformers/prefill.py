"""Prefill's pieces: the state a node leaves, fragments (a row of a prefill call), how
fragments are cut into calls, and the scored positions waiting for the output head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from runners.backends.transformers.model_calls import to_device
from runners.plan.prefix_tree import Node


@dataclass(frozen=True)
class PrefillConstants:
    """What sizes prefill's calls on one kind of device."""

    forward_overhead_tokens: int  # a call's fixed cost in padded tokens (forward_groups)
    chunk_rows: int  # rows the fp32 head takes at once (PendingLogprobs): bounds its logits


# Per device type. CPU: a call's fixed cost is reading the weights once; the dense-forward
# rates measured on this project's 2-core CPU (SmolLM2-135M fp32, 2 threads) put it at ~40
# tokens' time (1 x 8 and 1 x 30 tokens: 113 ms fixed, 2.9 ms a token) to ~200 (8 x 40 and
# 8 x 160: 326 ms fixed, 1.6 ms a token): 64 sits inside (docs/runner.md, *Prefill on a CPU
# and on a GPU*); 128 head rows of a 49k vocabulary are 25 MB of
# logits. CUDA: a documented choice until a GPU measures it (`make gpu-check` prints the dense
# rate): a forward there pays kernel launches for every layer and a full read of the weights
# (an 8B model: 16 GB at ~4.8 TB/s, ~3.3 ms) while a token costs microseconds, so a call is
# worth hundreds of padded tokens; and 1,024 head rows (a 152k vocabulary: 1.2 GB of fp32
# logits and log-sum-exp input) take a few launches where 128 take dozens.
DEVICE_CONSTANTS = {
    "cpu": PrefillConstants(forward_overhead_tokens=64, chunk_rows=128),
    "cuda": PrefillConstants(forward_overhead_tokens=512, chunk_rows=1024),
}
FORWARD_OVERHEAD_TOKENS = DEVICE_CONSTANTS["cpu"].forward_overhead_tokens


# exp of an input far below zero takes a slow path on x86 CPUs (~10x the time: the GPU
# check's CPU dry run, a random 128k-vocabulary head with wide logits, spent a third of its
# time in torch.logsumexp). Terms under exp(-87) cannot move a sum that holds the maximum's
# exp(0) = 1 in fp32, so flooring x - max there gives torch.logsumexp's value (bit for bit
# in tests/runners/test_numerics.py) without the slow path.
LOGSUMEXP_FLOOR = -87.0


def logsumexp_rows(logits: torch.Tensor) -> torch.Tensor:
    """torch.logsumexp(logits, dim=-1), on a CPU in fp32 without exp's slow path."""
    if logits.device.type != "cpu" or logits.dtype != torch.float32:
        return torch.logsumexp(logits, dim=-1)
    top = logits.amax(dim=-1, keepdim=True)
    if not torch.isfinite(top).all():  # a row of -inf or a NaN: torch's own rules
        return torch.logsumexp(logits, dim=-1)
    return (logits - top).clamp_(min=LOGSUMEXP_FLOOR).exp_().sum(dim=-1).log_() + top[:, 0]


def constants_for(device) -> PrefillConstants:
    """The constants of `device` (a torch.device or a name like "cuda:1"); the CPU's for a
    device type without its own."""
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    return DEVICE_CONSTANTS.get(kind, DEVICE_CONSTANTS["cpu"])


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

    CHUNK_ROWS = DEVICE_CONSTANTS["cpu"].chunk_rows  # the CPU's; a scorer passes its device's

    def __init__(self, chunk_rows: int = CHUNK_ROWS):
        self.chunk_rows = chunk_rows  # bounds the logits in memory: rows x vocabulary floats
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
        device = rows.device
        # Which targets each chunk of rows predicts is worked out on the host and sent over
        # without waiting: a `nonzero` on the device made the host wait for it per chunk.
        row_of, targets = torch.tensor(self.row_of), torch.tensor(self.targets)
        logprobs = torch.empty(len(targets), dtype=torch.float32, device=device)
        for start in range(0, len(rows), self.chunk_rows):
            end = min(start + self.chunk_rows, len(rows))
            logits = head(rows[start:end])
            mine = ((row_of >= start) & (row_of < end)).nonzero()[:, 0]
            local, wanted = (to_device(t, device) for t in (row_of[mine] - start,
                                                            targets[mine]))
            # log-softmax at the targets only: no vocabulary-sized output
            logprobs[to_device(mine, device)] = (
                logits[local, wanted] - logsumexp_rows(logits)[local]).float()
        logprobs = logprobs.cpu()  # the batch's one read-back of its scores
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


def forward_groups(fragments: list[Fragment], max_slots: int,
                   overhead_tokens: int = FORWARD_OVERHEAD_TOKENS) -> list[list[Fragment]]:
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
            cost = best[start] + overhead_tokens + rows * order[start].size
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], len(order)
    while end:
        groups.append(order[cut[end]:end])
        end = cut[end]
    return groups[::-1]
