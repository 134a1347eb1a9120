"""Evaluation backends and the run loop (the only package that imports torch/transformers).

Five rooms, each importing only the ones below it (pyproject.toml's import contract):

- `runners.cluster`: `run --ray`, the Ray launcher (driver) and the tasks its workers run.
- `runners.run`: the resumable run loop that writes cells into the store (`loop`), its batches
  (`batch_loop`), host work beside the model calls (`host_work`), admission checks, the
  stopper, the device queue, progress events and why a run failed (`failure`).
- `runners.backends`: what computes the cells, one module per backend behind the `Backend`
  protocol and its lazy registry (`base`): `transformers/` (batched prefix-tree scoring
  and its memory sizing), `vllm`, `openai/` (a served model).
- `runners.plan`: torch-free planning: items x configs -> token requests (`item_requests`),
  score types, the prompts' prefix tree, numerics, and the generic token budget (`budget`).
- `runners.models`: model specs -> prepared and loaded models with their provenance and
  fingerprint (`prepare`, `load`, `fingerprint`, `hub`, `quantized`, `cpu_linear`).
"""
