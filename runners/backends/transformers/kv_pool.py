"""The KV pool of a batch and the cache rows built from it.

`KVPool` holds the keys and values of every token forwarded in a batch, each once; a
decoder call's cache is gathered from it row by row (`gather`), and the call's new tokens
are stored back (`store`). Cache rows are `RoomyLayer`s: transformers' DynamicLayer
concatenates on every append, copying a row's whole cache at each decoding step; a
RoomyLayer appends in place into a buffer with spare room.
"""

from __future__ import annotations

import torch

from runners.backends.transformers.model_calls import to_device


class KVPool:
    """Keys and values of every token forwarded in a batch, each once.

    Per layer a tensor [slots, kv heads, head dim] on that layer's device (so a model
    sharded across GPUs keeps each layer's pool beside it). Slot 0 stays zero: it is what
    padding gathers. Layers that keep no cache of their own (KV sharing) stay None."""

    def __init__(self, capacity: int, scratch: "KVScratch | None" = None):
        self.scratch = scratch  # where gathered caches go on a CPU (KVScratch)
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
        for `room` more positions per row before it has to grow. One copy per layer: the
        index is padded with slot 0 over the room, so what index_select writes is the
        RoomyLayer's buffer itself."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        rows, length = index.shape
        padded = torch.zeros(rows, length + room, dtype=index.dtype)
        padded[:, :length] = index
        flat, on = padded.reshape(-1), {}  # on: the index moved to each device once
        layers = []
        for keys, values in zip(self.keys, self.values):
            if keys is None:  # a layer that reads another layer's cache
                layers.append(DynamicLayer())
                continue
            if keys.device not in on:
                on[keys.device] = to_device(flat, keys.device)  # the host goes on
            at, shape = on[keys.device], (rows, length + room, *keys.shape[1:])
            layers.append(roomy_layer(*(self._gathered(t, at, shape, (len(layers), kind))
                                        for kind, t in enumerate((keys, values))), length))
        cache = DynamicCache()
        cache.layers = layers
        return cache

    def _scratch_for(self, tensor: torch.Tensor) -> "KVScratch | None":
        """The kept scratch memory for tensors like `tensor`: only on a CPU (KVScratch)."""
        return self.scratch if tensor.device.type == "cpu" else None

    def _gathered(self, pool: torch.Tensor, at: torch.Tensor, shape, key) -> torch.Tensor:
        scratch = self._scratch_for(pool)
        if scratch is None:
            return pool.index_select(0, at).view(shape)
        out = scratch.take(key, shape, pool)
        torch.index_select(pool, 0, at, out=out.view(-1, *pool.shape[1:]))
        return out

    def fill_row(self, cache, row: int, slots: torch.Tensor) -> None:
        """Row `row` of a gathered cache becomes the slots `slots` (its first len(slots)
        positions), copied straight from the pool into the row."""
        self.fill_rows(cache, [row], slots[None])

    def fill_rows(self, cache, rows: list[int], slots: torch.Tensor) -> None:
        """Rows `rows` of a gathered cache become the slots `slots` [len(rows), length]
        (their first `length` positions): one copy per layer and kind for all of them (a
        step's refilled rows together), straight into the row where there is one."""
        count, length = slots.shape
        at = {}
        for layer, keys, values in zip(cache.layers, self.keys, self.values):
            if keys is None:
                continue
            if keys.device not in at:  # the rows' index only where there are several
                at[keys.device] = (to_device(slots.reshape(-1), keys.device),
                                   to_device(torch.tensor(rows), keys.device)
                                   if count > 1 else None)
            flat, where = at[keys.device]
            for pool, buffer in zip((keys, values), layer.token_major_states()):
                if count == 1:
                    torch.index_select(pool, 0, flat, out=buffer[rows[0], :length])
                else:
                    buffer[where, :length] = pool.index_select(0, flat).view(
                        count, length, *pool.shape[1:])

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
            for source, pool in zip(token_major(layer), (keys, values)):
                count, width, heads, dim = source.shape
                if (pool.device, width) not in index:
                    index[pool.device, width] = to_device(rows * width + offset + cols,
                                                          pool.device)
                # Whole [heads, dim] blocks picked straight into the slot range.
                flat = source.view(count * width, heads, dim)
                torch.index_select(flat, 0, index[pool.device, width], out=pool[first:end])

    def _allocate_like(self, cache) -> None:
        for number, layer in enumerate(cache.layers):
            if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
                self.keys.append(None)
                self.values.append(None)
                continue
            for kind, (source, pool) in enumerate(((layer.keys, self.keys),
                                                   (layer.values, self.values))):
                _, heads, _, dim = source.shape
                # Uninitialised but slot 0 (what padding gathers): every other slot is
                # stored right after the call that forwards its token, before any gather
                # reads it. (Zero-filling the whole pool was a tenth of the host time.)
                shape = (self.capacity, heads, dim)
                scratch = self._scratch_for(source)
                tensor = (torch.empty(shape, dtype=source.dtype, device=source.device)
                          if scratch is None else scratch.take(("pool", number, kind), shape,
                                                               source))
                tensor[0] = 0
                pool.append(tensor)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values
                   if t is not None)


class KVScratch:
    """Memory that gathered caches are written into on a CPU, kept from one call to the
    next. A fresh tensor of hundreds of MB costs a page fault per 4 KiB on first touch,
    which made a decoding batch's gather several times slower than the copy itself
    (SmolLM2, 16 rows x 524 positions: 0.56 s). The pools are kept here too, one batch's
    after the other's. A caller gathers into it only once the cache gathered before is no
    longer used (a prefill call's cache is dropped after its store; a decoding batch's
    rows after their last step), and a batch's pool is made once the batch before is
    done. GPUs have their caching allocator and do not use this."""

    def __init__(self):
        self.tensors: dict[tuple, torch.Tensor] = {}  # (layer, keys or values) -> flat

    def take(self, key: tuple, shape, like: torch.Tensor) -> torch.Tensor:
        """An uninitialised tensor of `shape` (like's dtype and device) on kept memory."""
        numel = 1
        for size in shape:
            numel *= size
        held = self.tensors.get(key)
        if held is None or held.numel() < numel or held.dtype != like.dtype:
            held = torch.empty(numel + numel // 4, dtype=like.dtype, device=like.device)
            self.tensors[key] = held
        return held[:numel].view(shape)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def clear(self) -> None:
        self.tensors.clear()


def token_major(layer) -> tuple[torch.Tensor, torch.Tensor]:
    """A cache layer's keys and values as contiguous [rows, positions, heads, dim]: a
    RoomyLayer's buffers as they are, another layer's states transposed (one copy)."""
    if hasattr(layer, "token_major_states"):
        return layer.token_major_states()
    return tuple(t.transpose(1, 2).contiguous() for t in (layer.keys, layer.values))


def _roomy_layer_class():
    from transformers.cache_utils import DynamicLayer

    class RoomyLayer(DynamicLayer):
        """A DynamicLayer that appends in place into a buffer with spare room (growing by a
        quarter when full): DynamicLayer concatenates, copying a row's whole cache at every
        decoding step, which dominated decoding on a CPU.

        The buffers are token-major, [rows, capacity, kv heads, dim], the pool's own layout:
        a gather from the pool writes them in one copy and a store reads them without a
        transpose. The model sees `keys`/`values` as [rows, heads, length, dim] views of
        them (strided; SDPA's CPU flash kernel reads this layout natively)."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int):
            super().__init__()
            self.is_initialized, self.device = True, keys.device
            self.length, self.rows = length, keys.shape[0]
            self._keys, self._values = keys, values
            self._views()

        def _views(self) -> None:
            live = slice(0, self.rows)
            self.keys = self._keys[live, :self.length].transpose(1, 2)
            self.values = self._values[live, :self.length].transpose(1, 2)

        def token_major_states(self) -> tuple[torch.Tensor, torch.Tensor]:
            return self._keys, self._values

        def update(self, key_states, value_states, *args, **kwargs):
            count = key_states.shape[-2]
            if self.length + count > self._keys.shape[1]:
                capacity = self.length + count + max(64, self.length // 4)
                self._keys, self._values = (self._grown(t, capacity)
                                            for t in (self._keys, self._values))
            end = self.length + count
            self._keys[:self.rows, self.length:end] = key_states.transpose(1, 2)
            self._values[:self.rows, self.length:end] = value_states.transpose(1, 2)
            self.length = end
            self._views()
            return self.keys, self.values

        def _grown(self, buffer: torch.Tensor, capacity: int) -> torch.Tensor:
            # The room past `length` is written (update, fill_row) before any view
            # covers it, so it need not be zeroed: zeroing was a sixth of the host time.
            grown = buffer.new_empty(self.rows, capacity, *buffer.shape[2:])
            grown[:, :self.length] = buffer[:self.rows, :self.length]
            return grown

        def get_seq_length(self) -> int:
            return self.length

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            """Keep rows `indices`: ascending ones (dropping finished rows) are moved down
            in place, a row copy each, rather than copying the whole cache. The scorer
            passes them on the host (DecodingRows.step): read from a device tensor, every
            layer would make the host wait for the device."""
            kept = indices.tolist()
            if all(a < b for a, b in zip(kept, kept[1:])):
                for to, source in enumerate(kept):
                    if to != source:
                        for buffer in (self._keys, self._values):
                            buffer[to, :self.length] = buffer[source, :self.length]
                self.rows = len(kept)
            else:
                indices = to_device(indices, self._keys.device)  # sharded layers differ
                self._keys, self._values = self._keys[indices], self._values[indices]
                self.rows = len(kept)
            self._views()

    return RoomyLayer


def roomy_layer(keys: torch.Tensor, values: torch.Tensor, length: int):
    """A RoomyLayer over token-major buffers whose first `length` positions are filled.
    Built lazily: transformers is imported only when a model scores."""
    global _ROOMY_LAYER
    if _ROOMY_LAYER is None:
        _ROOMY_LAYER = _roomy_layer_class()
    return _ROOMY_LAYER(keys, values, length)


_ROOMY_LAYER = None
