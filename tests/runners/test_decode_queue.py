"""The decoding queue (runners.backends.transformers.decoding): groups with the most leaves go first, so rows
decoded together carry about as many queries each, and a call's rows are padded to the
longest keys it took, not the first."""

from __future__ import annotations

from collections import deque

import pytest

torch = pytest.importorskip("torch")

from runners.backends.transformers import decoding, scoring  # noqa: E402
from runners.backends.transformers.decoding import decode_order, decode_room, take_rows  # noqa: E402
from test_scoring import _assert_matches_reference, _scorer  # noqa: E402


def _group(leaves: int, keys: int):
    return list(range(leaves)), torch.arange(keys)


def test_groups_are_queued_most_leaves_first_then_longest_keys():
    groups = [_group(1, 90), _group(4, 30), _group(2, 70), _group(4, 60), _group(1, 10)]
    ordered = sorted(groups, key=decode_order)
    assert [(len(g), len(k)) for g, k in ordered] == [(4, 60), (4, 30), (2, 70), (1, 90),
                                                     (1, 10)]


def test_a_call_is_budgeted_at_the_longest_keys_it_takes():
    room = decode_room(decoding.DECODE_GROUP_LEAVES, 4, refills=True)
    queue = deque([_group(4, 10), _group(4, 10), _group(2, 50), _group(2, 10)])
    # two rows of 10 keys fit; a third row of 50 would make three rows of 50 keys
    taken = take_rows(queue, max_slots=2 * (10 + room) + 1, max_new_tokens=4)
    assert len(taken) == 2 and len(queue) == 2
    taken = take_rows(queue, max_slots=3 * (50 + room), max_new_tokens=4)
    assert [len(k) for _, k in taken] == [50, 10]
    queue = deque([_group(4, 10), _group(2, 50)])
    assert len(take_rows(queue, max_slots=2 * (50 + room) - 1, max_new_tokens=4)) == 1


def test_ordering_by_leaves_pads_fewer_decoding_queries(tiny_model, tiny_tokenizer, monkeypatch):
    """Rows of 200 prompt keys at most split the toy prompts into groups of 1-4 leaves (real
    prompts of 100-650 tokens do it at 512): ordered by leaves, the same answers as the
    plain loop, in as many calls as ordered by keys, with fewer padded query positions."""
    monkeypatch.setattr(decoding, "DECODE_GROUP_KEYS", 200)
    _, by_leaves = _assert_matches_reference(tiny_model, tiny_tokenizer,
                                             _scorer(tiny_model, tiny_tokenizer), True,
                                             max_slots=1000)
    monkeypatch.setattr("runners.backends.transformers.scoring.decode_order", lambda group: -len(group[1]))
    _, by_keys = _assert_matches_reference(tiny_model, tiny_tokenizer,
                                           _scorer(tiny_model, tiny_tokenizer), True,
                                           max_slots=1000)
    assert by_leaves.stats.decode_calls == by_keys.stats.decode_calls
    assert by_leaves.stats.decode_padding < 0.5 * by_keys.stats.decode_padding


def test_rows_finished_in_one_step_are_refilled_together(tiny_model, tiny_tokenizer,
                                                         monkeypatch):
    """Issue 59: the rows that finish in a step take their waiting groups at once, with one
    copy from the pool, one head call and one judge, and answer as the plain loop does. A
    tight budget keeps groups waiting, one leaf a row makes rows finish together."""
    for module in (decoding, scoring):
        monkeypatch.setattr(module, "DECODE_GROUP_LEAVES", 1)
    rounds, heads = [], []
    refill, first_logits = decoding.DecodingRows.refill, decoding.DecodingRows._first_logits

    def counted_refill(self, rows):
        filled = refill(self, rows)
        rounds.append(len(filled))
        return filled

    def counted_head(self, rows):
        heads.append(len(rows))
        return first_logits(self, rows)

    monkeypatch.setattr(decoding.DecodingRows, "refill", counted_refill)
    monkeypatch.setattr(decoding.DecodingRows, "_first_logits", counted_head)
    calls = 0
    init = decoding.DecodingRows.__init__

    def counted_init(self, *args, **kwargs):
        nonlocal calls
        calls += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(decoding.DecodingRows, "__init__", counted_init)
    _assert_matches_reference(tiny_model, tiny_tokenizer, _scorer(tiny_model, tiny_tokenizer),
                              True, max_slots=600)
    filled = [n for n in rounds if n]
    assert filled and max(filled) > 1, rounds  # several rows in one round
    # one head call as each call's rows start, then one per round that filled rows
    assert len(heads) - len(filled) == calls and len(heads) < sum(heads)
