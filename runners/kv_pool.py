"""The KV pool of a batch and the cache rows built from it.

`KVPool` holds the keys and values of every token forwarded in a batch, each once; a
decoder call's cache is gathered from it row by row (`gather`), and the call's new tokens
are stored back (`store`). Cache rows are `RoomyLayer`s: transformers' DynamicLayer
concatenates on every append, copying a row's whole cache at each decoding step; a
RoomyLayer appends in place into a buffer with spare room.
"""

from __future__ import annotations

import torch


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

    def allocate_at(self, positions: torch.Tensor) -> torch.Tensor:
        """Fresh slots, one range, for tokens at the given logical positions (a whole
        call's tokens at once)."""
        count = len(positions)
        if self.used + count > self.capacity:
            raise RuntimeError("KV pool overflow: more tokens than the tree holds")
        slots = torch.arange(self.used, self.used + count)
        self.positions[slots] = positions
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
        flat, on = index.reshape(-1), {}  # on: the index moved to each device once
        layers = []
        for keys, values in zip(self.keys, self.values):
            if keys is None:  # a layer that reads another layer's cache
                layers.append(DynamicLayer())
                continue
            if keys.device not in on:
                on[keys.device] = flat.to(keys.device)
            at = on[keys.device]
            layers.append(roomy_layer(*(t.index_select(0, at).view(rows, length, *t.shape[1:])
                                        .transpose(1, 2) for t in (keys, values)), room))
        cache = DynamicCache()
        cache.layers = layers
        return cache

    def store(self, cache, offset: int, rows: torch.Tensor, cols: torch.Tensor,
              slots: torch.Tensor) -> None:
        """Copy cache positions (rows[i], offset + cols[i]) into pool slots[i], which must be
        one ascending range (a call's fresh slots, allocated in placement order)."""
        if not self.keys:
            self._allocate_like(cache)
        first, end = int(slots[0]), int(slots[-1]) + 1
        if end - first != len(slots) or not torch.equal(slots, torch.arange(first, end)):
            raise ValueError("KVPool.store expects one ascending range of slots")
        index = {}  # per (device, width): the positions' flat index, built there once
        for layer, keys, values in zip(cache.layers, self.keys, self.values):
            if keys is None:
                continue
            for source, pool in ((layer.keys, keys), (layer.values, values)):
                new = source[:, :, offset:]  # [rows, heads, new positions, dim]
                count, heads, width, dim = new.shape
                if (pool.device, width) not in index:
                    index[pool.device, width] = (rows * width + cols).to(pool.device)
                # The new positions made contiguous, then whole [heads, dim] blocks picked
                # straight into the slot range: half the time of indexing [rows, :, cols].
                flat = new.transpose(1, 2).reshape(count * width, heads, dim)
                torch.index_select(flat, 0, index[pool.device, width], out=pool[first:end])

    def _allocate_like(self, cache) -> None:
        for layer in cache.layers:
            if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
                self.keys.append(None)
                self.values.append(None)
                continue
            for source, pool in ((layer.keys, self.keys), (layer.values, self.values)):
                _, heads, _, dim = source.shape
                # Uninitialised but slot 0 (what padding gathers): every other slot is
                # stored right after the call that forwards its token, before any gather
                # reads it. (Zero-filling the whole pool was a tenth of the host time.)
                tensor = torch.empty(self.capacity, heads, dim, dtype=source.dtype,
                                     device=source.device)
                tensor[0] = 0
                pool.append(tensor)

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
            # The room past `length` is written (update, replace_row) before any view
            # covers it, so it need not be zeroed: zeroing was a sixth of the host time.
            buffer = states.new_empty(*states.shape[:-2], capacity, states.shape[-1])
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


def roomy_layer(keys: torch.Tensor, values: torch.Tensor, room: int):
    """Built lazily: transformers is imported only when a model scores."""
    global _ROOMY_LAYER
    if _ROOMY_LAYER is None:
        _ROOMY_LAYER = _roomy_layer_class()
    return _ROOMY_LAYER(keys, values, room)


_ROOMY_LAYER = None
