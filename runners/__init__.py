"""Evaluation backends and the run loop (the only package that imports torch/transformers).

- `runners.models`: model specs (aliases, folders, .gguf files, hub ids) -> a loaded model
  with its provenance; GGUF conversion cache; optimum-quanto int8/int4 builds.
- `runners.prefix_tree`: the token radix tree of a batch's prompts (shared-prefix reuse).
- `runners.scoring`: likelihood and generation scoring over that tree (KV reuse, batching).
- `runners.loop`: the resumable run loop that writes cells into the store.
- `runners.events`: JSON-lines progress events and the human display.
- `runners.launch`: start a run detached from the terminal (used by the TUI).
"""
