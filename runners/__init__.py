"""Evaluation backends and the run loop (the only package that imports torch/transformers).

- `runners.models`: model specs (aliases, folders, .gguf files, hub ids) -> a loaded model
  with its provenance; GGUF conversion cache; optimum-quanto int8/int4 builds.
- `runners.item_requests`: items x configs -> token requests (and results -> cells).
- `runners.prefix_tree`: the token radix tree of a batch's prompts (shared-prefix reuse).
- `runners.scoring`: likelihood and generation scoring over that tree in batched forwards,
  with `prefill`, `decoding`, `kv_pool` and `model_probe` as its parts.
- `runners.batching`: the token budget that sizes batches (memory, out-of-memory halving).
- `runners.loop`: the resumable run loop that writes cells into the store.
- `runners.plain_loop`: a deliberately plain one-prompt-at-a-time implementation, for checks.
- `runners.events`: JSON-lines progress events and the human display.
"""
