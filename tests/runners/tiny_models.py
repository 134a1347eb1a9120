"""Tiny in-process models for runner (and app) tests: no file, no download.

The tokenizer is a byte-level BPE trained here with `tokenizers` on a little English, given
a ChatML-style chat template (so it counts as an instruct model) and an EOS token. The
model is a 2-layer random Llama with a large weight scale so its logits are far apart:
greedy choices and likelihood rankings are then stable under float rounding, which is what
the invariance tests need (a near-uniform random model would make ties everywhere).
"""

from __future__ import annotations

import torch

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CORPUS = [
    "Question: Which gas do plants absorb from the air? Answer: carbon dioxide",
    "A. oxygen B. nitrogen C. carbon dioxide D. helium (A) (B) (C) (D) 1. 2. 3. 4.",
    "Answer with the letter of the correct option only (A, B, C or D).",
    "The answer is B. The capital of France is Paris. Water boils at 100 degrees.",
    "A man is sitting on a roof. He starts pulling up roofing on the roof.",
    "What is the largest planet in the solar system? Jupiter Mars Venus Earth",
] * 20


def make_tokenizer(chat: bool = True, merge_across_spaces: bool = False,
                   adds_bos: bool = False):
    """merge_across_spaces: no whitespace pre-split, so BPE merges span spaces (":Ġ",
    "?Ġ", "HeĠ"): the tokens of context + continuation then differ from the context's own
    tokens at the boundary, the case where lm-eval's conditioning matters (docs/runner.md,
    "Scoring"). adds_bos: the tokenizer puts its BOS token first, as Llama's and Gemma's
    do (without it, none, as Qwen's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                 use_regex=not merge_across_spaces)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>",
                                                                   "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    if adds_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<|endoftext|> $A", pair="<|endoftext|> $A $B",
            special_tokens=[("<|endoftext|>", tok.token_to_id("<|endoftext|>"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   bos_token="<|endoftext|>", pad_token="<|endoftext|>")
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def make_model(tokenizer, seed: int = 0, scale: float = 0.5):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=48, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=1024, initializer_range=scale,
                         bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model
