"""The token radix tree of a batch of prompts (torch-free).

Every prompt of a batch (24 generation prompts and 2 x 4 cloze sequences per item) is a path
from the root; shared prefixes (the chat header, the question stem, the cloze context) are
one node, forwarded once. A node's `segment` is the tokens it adds to its parent's. Each
request ends at its own node: when one request's tokens are a prefix of another's, it gets
an empty-segment child, so every request has a leaf whose state (KV cache, last logits) is
exactly its full prompt's.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Node:
    segment: list[int]
    start: int  # absolute position of segment[0] in the sequence
    children: list["Node"] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)  # indices of requests ending here
    needs_logprobs: bool = False  # some likelihood request scores tokens of this segment
    trim_last: bool = False  # a likelihood-only leaf: its last token is scored, not forwarded

    @property
    def end(self) -> int:
        return self.start + len(self.segment)

    @property
    def forwarded(self) -> list[int]:
        """The tokens prefill runs through the decoder: the whole segment, except a
        likelihood-only leaf's last token, whose features nothing reads (its log-probability
        comes from the position before it; lm-eval drops it too)."""
        return self.segment[:-1] if self.trim_last else self.segment


def build_tree(sequences: list[list[int]], *, share: bool = True) -> list[Node]:
    """Roots of the radix tree over `sequences` (one root per sequence when share=False)."""
    entries = list(enumerate(sequences))
    if not share:
        return [_build(entries[i:i + 1], 0) for i in range(len(entries))]
    groups: dict[int | None, list] = {}
    for index, seq in entries:
        groups.setdefault(seq[0] if seq else None, []).append((index, seq))
    return [_build(group, 0) for group in groups.values()]


def _build(entries: list[tuple[int, list[int]]], offset: int) -> Node:
    """The node for `entries`, which all share seq[:offset]."""
    lcp = _common_prefix_length([seq[offset:] for _, seq in entries])
    end = offset + lcp
    node = Node(entries[0][1][offset:end], offset)
    ending = [index for index, seq in entries if len(seq) == end]
    rest: dict[int, list] = {}
    for index, seq in entries:
        if len(seq) > end:
            rest.setdefault(seq[end], []).append((index, seq))
    if ending and not rest:
        node.requests = ending
        return node
    if ending:
        node.children.append(Node([], end, requests=ending))
    node.children.extend(_build(group, end) for group in rest.values())
    return node


def _common_prefix_length(seqs: list[list[int]]) -> int:
    shortest = min(len(s) for s in seqs)
    first = seqs[0]
    for i in range(shortest):
        tok = first[i]
        if any(s[i] != tok for s in seqs):
            return i
    return shortest


def mark_logprob_nodes(roots: list[Node], scored_from: dict[int, int]) -> None:
    """Flag nodes holding tokens some likelihood request scores (absolute pos >= its start)."""
    def visit(node: Node) -> int:
        """Smallest scored-from position among the requests below `node` (large if none)."""
        lowest = min((scored_from.get(r, 1 << 60) for r in node.requests), default=1 << 60)
        for child in node.children:
            lowest = min(lowest, visit(child))
        node.needs_logprobs = lowest < node.end
        return lowest

    for root in roots:  # trees are shallow (a few branching levels): recursion is fine
        visit(root)


def mark_scored_leaves(roots: list[Node], first_likelihood: int) -> None:
    """Set trim_last on leaves that only likelihood requests (index >= first_likelihood)
    end at, with at least two tokens (so every forwarded segment keeps one)."""
    stack = list(roots)
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        node.trim_last = (not node.children and len(node.segment) >= 2 and bool(node.requests)
                          and min(node.requests) >= first_likelihood)


def count_tokens(roots: list[Node], *, forwarded: bool = False) -> int:
    """Unique tokens in the tree (what a perfect prefix cache forwards); with forwarded,
    only those prefill runs through the decoder (Node.forwarded)."""
    total, stack = 0, list(roots)
    while stack:
        node = stack.pop()
        total += len(node.forwarded if forwarded else node.segment)
        stack.extend(node.children)
    return total
