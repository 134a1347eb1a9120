"""The loaded model as the scorer calls it: the decoder ("backbone") with explicit masks,
positions and a cache, and the output head run apart from it on the rows that need logits.

This is the seam between prefill (runners.backends.transformers.scoring) and decoding (runners.backends.transformers.decoding): both
build rows and masks and call the model only through `ModelCalls`, so neither reaches into
the other. What is known about the model by probing it (cache keyword, head split, attention
layout) is decided here once, at load."""

from __future__ import annotations

import time

import torch

from runners.backends.transformers.model_probe import attention_layout, cache_keyword, split_output_head


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device` without making the host wait: on CUDA it is copied into
    pinned memory and sent with non_blocking, so the copy queues behind the kernels already
    running and the host goes on building the next call (a plain `.to` from pageable memory
    waits for the device); anywhere else, `.to` as before (on the CPU: the tensor itself)."""
    if torch.device(device).type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


class CallClock:
    """Start and end of every model call (decoder forwards and output-head calls), summed:
    a run compares it with its wall time to say how long no model call was in flight
    (runners.run.host_work.HostTiming). Calls come from one thread and never nest, so the sum
    is the time covered. On CUDA a call returns once its kernels are queued and its inputs
    go over without blocking (`to_device`); the scorer reads results back once a decoding
    step and once a batch's head, so the figure is close but not exact there."""

    def __init__(self):
        self.seconds = 0.0
        self.calls = 0

    def call(self, function, *args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1

    def timed(self, function):
        return lambda *args, **kwargs: self.call(function, *args, **kwargs)


class ModelCalls:
    def __init__(self, model, device: torch.device):
        self.model = model
        self.device = device
        dtype = getattr(model, "dtype", torch.float32)
        self.mask_dtype = dtype if dtype.is_floating_point else torch.float32
        self.cache_kw = cache_keyword(model)
        self.clock = CallClock()
        self.backbone, head, self.head_precision = split_output_head(
            model, self.cache_kw, device)
        self.head = self.clock.timed(head)
        self.layer_types, self.sliding_window, self.tree_masks = attention_layout(model.config)

    @property
    def head_split(self) -> bool:
        """Whether the head runs apart from the decoder (False: whole-model logits)."""
        return self.backbone is not self.model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                cache) -> torch.Tensor:
        """One decoder call over rows of `ids` (CPU tensors, moved here) appending to
        `cache`; the features the head reads (hidden states, or logits when not split)."""
        out = self.clock.call(self.backbone, input_ids=to_device(ids, self.device),
                              attention_mask=mask,
                              position_ids=to_device(positions, self.device),
                              use_cache=True, **{self.cache_kw: cache})
        return out.last_hidden_state if self.head_split else out.logits

    def plain_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """fp32 logits of one whole sequence [1, n] through the same head, no mask, no
        cache: what a probe compares the batched path with."""
        out = self.backbone(input_ids=ids)
        return self.head(out.last_hidden_state if self.head_split else out.logits)

    def tree_mask(self, visible: torch.Tensor, query_positions: torch.Tensor,
                  key_positions: torch.Tensor, top_position: int):
        """The additive 4D mask for `visible` [rows, queries, keys]; per layer type when a
        sliding window is shorter than these positions (windows count logical positions).
        `top_position`: the host's bound on the largest query position (reading the
        positions' maximum off the device would make the host wait for it); a bound above
        the window with every position below it only adds a sliding mask equal to the full
        one."""
        masks = {"full_attention": visible}
        window = self.sliding_window
        if window is not None and top_position >= window:
            near = query_positions[:, :, None] - key_positions[:, None, :] < window
            masks["sliding_attention"] = visible & near
        additive = {kind: self._additive(mask) for kind, mask in masks.items()}
        if len(additive) == 1:
            return additive["full_attention"]
        if self.layer_types is None:  # every layer slides
            return additive["sliding_attention"]
        return additive

    def _additive(self, visible: torch.Tensor) -> torch.Tensor:
        """[rows, 1, queries, keys]: 0 where visible, the dtype's minimum elsewhere."""
        dtype = self.mask_dtype
        mask = torch.zeros(visible.shape, dtype=dtype, device=self.device)
        mask.masked_fill_(~to_device(visible, self.device), torch.finfo(dtype).min)
        return mask[:, None]
