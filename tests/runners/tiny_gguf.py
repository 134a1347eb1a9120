"""A tiny GGUF file written with the `gguf` package: a 2-layer Llama (hidden 64, 4 query
heads over 2 KV heads) in F32 with a byte-level BPE tokenizer over printable ASCII that
transformers can rebuild from the metadata. It loads in well under a second (the offline
SmolLM2 GGUF takes ~17 s), so tests can convert it in several processes."""

from __future__ import annotations

import gguf
import numpy as np

HIDDEN, FFN, HEADS, KV_HEADS, LAYERS = 64, 128, 4, 2, 2


def write_tiny_gguf(path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    # transformers' GGUF tokenizer reader needs merges (or scores), and every merge's
    # result in the vocabulary. Two merges, not one: transformers 5.17's reader turns a
    # one-element array into a bare string and splits it into characters.
    tokens = [chr(c) for c in range(33, 127)] + ["Ġ", "Ċ", "Ġa", "Ġt", "<|endoftext|>"]
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * (vocab - 1) + [3])  # the last one is a control token
    w.add_token_merges(["Ġ a", "Ġ t"])
    w.add_token_scores([0.0] * vocab)
    w.add_bos_token_id(vocab - 1)
    w.add_eos_token_id(vocab - 1)

    def weight(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    head_dim = HIDDEN // HEADS
    weight("token_embd.weight", vocab, HIDDEN)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    weight("output.weight", vocab, HIDDEN)
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, np.float32))
        weight(f"blk.{i}.attn_q.weight", HIDDEN, HIDDEN)
        weight(f"blk.{i}.attn_k.weight", KV_HEADS * head_dim, HIDDEN)
        weight(f"blk.{i}.attn_v.weight", KV_HEADS * head_dim, HIDDEN)
        weight(f"blk.{i}.attn_output.weight", HIDDEN, HIDDEN)
        weight(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        weight(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        weight(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
