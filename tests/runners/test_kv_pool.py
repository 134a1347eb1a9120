"""The KV pool's caches: gathered in one copy into kept memory on a CPU, rows refilled
straight from the pool, finished rows dropped in place, stores read back what was
gathered and appended."""

from __future__ import annotations

import pytest
import torch

from runners.backends.transformers.kv_pool import KVPool, KVScratch

LAYERS, HEADS, DIM = 2, 3, 4


def _pool(slots: int, scratch=None) -> KVPool:
    """A pool whose slot s holds keys s + layer/10 and values -(s + layer/10)."""
    pool = KVPool(slots, scratch)
    for layer in range(LAYERS):
        keys = torch.arange(slots + 1, dtype=torch.float32)[:, None, None] + layer / 10
        keys = keys.expand(slots + 1, HEADS, DIM).clone()
        keys[0] = 0
        pool.keys.append(keys)
        pool.values.append(-keys)
    pool.used = slots + 1
    return pool


def _rows(cache, layer: int = 0) -> torch.Tensor:
    """Per row and position, the slot number the cache's keys came from."""
    return cache.layers[layer].keys[:, 0, :, 0].round()


INDEX = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [0, 0, 8, 9]])


@pytest.mark.parametrize("scratch", [None, KVScratch()], ids=["fresh", "scratch"])
def test_a_gathered_cache_holds_each_rows_slots_with_room_to_append(scratch):
    pool = _pool(9, scratch)
    cache = pool.gather(INDEX, room=2)
    layer = cache.layers[1]
    assert layer.keys.shape == (3, HEADS, 4, DIM)
    assert torch.equal(_rows(cache), INDEX.float())
    assert torch.allclose(layer.keys[:, 0, :, 0], INDEX + 0.1 * (INDEX > 0))
    assert torch.equal(layer.values, -layer.keys)
    new = torch.full((3, HEADS, 2, DIM), 50.0)
    keys, _ = layer.update(new, -new)
    assert keys.shape == (3, HEADS, 6, DIM) and torch.equal(keys[:, :, 4:], new)
    assert layer.token_major_states()[0].data_ptr() == keys.data_ptr()  # appended in place


def test_scratch_memory_is_reused_from_one_gather_to_the_next():
    scratch = KVScratch()
    pool = _pool(9, scratch)
    first = pool.gather(INDEX, room=2).layers[0].keys.data_ptr()
    second = pool.gather(INDEX[:2], room=1).layers[0].keys
    assert second.data_ptr() == first  # the same memory, no fresh allocation
    assert torch.equal(second[:, 0, :, 0].round(), INDEX[:2].float())
    held = scratch.nbytes()
    pool.gather(torch.arange(1, 10).repeat(4, 1), room=8)  # bigger: grows once
    assert scratch.nbytes() > held
    scratch.clear()  # after running out of memory
    assert scratch.nbytes() == 0


def test_a_store_puts_a_calls_new_positions_into_its_slot_range():
    pool = _pool(9, KVScratch())
    cache = pool.gather(INDEX[:2], room=2)
    new = torch.arange(2 * 2, dtype=torch.float32).view(2, 1, 2, 1).expand(2, HEADS, 2, DIM)
    for layer in cache.layers:
        layer.update(new + 100, -(new + 100))
    target = KVPool(4, None)
    target.used = 5
    target.store(cache, 4, torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 0, 1]),
                 torch.arange(1, 5))
    assert torch.equal(target.keys[0][1:5, 0, 0], torch.tensor([100.0, 101, 102, 103]))
    assert torch.equal(target.values[1], -target.keys[1])


def test_refilling_a_row_copies_its_slots_from_the_pool():
    pool = _pool(9, KVScratch())
    cache = pool.gather(INDEX, room=1)
    pool.fill_row(cache, 1, torch.tensor([9, 8, 0, 0]))
    assert torch.equal(_rows(cache, 1), torch.tensor([[0, 1, 2, 3], [9, 8, 0, 0],
                                                       [0, 0, 8, 9]], dtype=torch.float32))


@pytest.mark.parametrize("kept", [[0, 2], [1, 2], [2], [2, 0]])
def test_dropping_rows_keeps_the_others_in_order(kept):
    pool = _pool(9, KVScratch())
    cache = pool.gather(INDEX, room=3)
    cache.batch_select_indices(torch.tensor(kept))
    assert torch.equal(_rows(cache), INDEX[kept].float())
    new = torch.full((len(kept), HEADS, 1, DIM), 70.0)
    keys, values = cache.layers[0].update(new, -new)  # appending still works after it
    assert keys.shape == (len(kept), HEADS, 5, DIM)
    assert torch.equal(keys[:, 0, :4, 0].round(), INDEX[kept].float())
    assert torch.equal(values[:, :, 4:], -new)


def test_a_cache_that_runs_out_of_room_grows_and_keeps_its_rows():
    pool = _pool(9, KVScratch())
    cache = pool.gather(INDEX, room=1)
    cache.batch_select_indices(torch.tensor([0, 2]))
    layer = cache.layers[0]
    for step in range(5):
        new = torch.full((2, HEADS, 1, DIM), 80.0 + step)
        keys, _ = layer.update(new, -new)
    assert keys.shape == (2, HEADS, 9, DIM)
    assert torch.equal(keys[:, 0, :4, 0].round(), INDEX[[0, 2]].float())
    assert torch.equal(keys[0, 0, 4:, 0], torch.tensor([80.0, 81, 82, 83, 84]))



def test_refilling_several_rows_at_once_copies_each_rows_slots():
    """A step's finished rows are refilled together (DecodingRows.refill): one copy per
    layer for all of them, the same rows as one copy each."""
    pool = _pool(9, KVScratch())
    together, one_by_one = pool.gather(INDEX, room=1), pool.gather(INDEX, room=1)
    slots = torch.tensor([[9, 8, 0, 0], [5, 6, 7, 0]])
    pool.fill_rows(together, [2, 0], slots)
    pool.fill_row(one_by_one, 2, slots[0])
    pool.fill_row(one_by_one, 0, slots[1])
    for layer in range(LAYERS):
        assert torch.equal(_rows(together, layer), _rows(one_by_one, layer))
        assert torch.equal(together.layers[layer].values, one_by_one.layers[layer].values)
    assert torch.equal(_rows(together), torch.tensor([[5, 6, 7, 0], [4, 5, 6, 7],
                                                       [9, 8, 0, 0]], dtype=torch.float32))
