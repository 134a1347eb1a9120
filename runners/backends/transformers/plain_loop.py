"""A deliberately plain reference implementation of the 26 configs, for checks and the
benchmark: one prompt at a time, no batching, no cache reuse, `model.generate` for the
generation configs and one full forward per option for the cloze configs.

It shares no code with runners.backends.transformers.scoring / runners.plan.item_requests (it tokenises on its own), so
agreement between the two is evidence, not a tautology.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fragility_tui.items.item import Item
from fragility_tui.harness.parser import parse_answer
from fragility_tui.harness.render import GenerationPrompt, render


@dataclass
class ReferenceCell:
    pred: int  # native option index, -1 = unparsed
    output: str | None = None  # generated text (generation configs)
    scores: list[float] | None = None  # raw log-likelihoods (cloze configs)
    margin: float = float("inf")  # closeness to a tie: min top-2 logit gap over the greedy
    # steps (generation) or the top-2 gap of the normalised scores (cloze)
    tokens: int = 0  # tokens forwarded to produce this cell


@torch.no_grad()
def reference_cell(model, tokenizer, item: Item, config_id: str, seed: int,
                   max_new_tokens: int = 16, *, chat: bool | None = None,
                   template_args: dict | None = None) -> ReferenceCell:
    """`chat`: prompt through the chat template (the run's prompt mode); None: whenever the
    tokenizer has one. `template_args`: the run's pinned template arguments."""
    prompt = render(item, config_id, seed)
    if isinstance(prompt, GenerationPrompt):
        chat = bool(tokenizer.chat_template) if chat is None else chat
        return _generate(model, tokenizer, prompt, max_new_tokens, chat, template_args or {})
    return _cloze(model, tokenizer, prompt)


def _generate(model, tokenizer, prompt: GenerationPrompt, max_new_tokens: int, chat: bool,
              template_args: dict) -> ReferenceCell:
    if chat:
        text = tokenizer.apply_chat_template(list(prompt.messages), tokenize=False,
                                             add_generation_prompt=True, **template_args)
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    else:
        ids = tokenizer(prompt.text, return_tensors="pt")["input_ids"]
    ids = ids.to(model.device)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=max_new_tokens, output_scores=True,
                         return_dict_in_generate=True,
                         pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
    new = out.sequences[0, ids.shape[1]:]
    output = tokenizer.decode(new, skip_special_tokens=True)
    margins = [float(top[0] - top[1]) for top in
               (torch.topk(step[0].float(), 2).values for step in out.scores)]
    position = parse_answer(output, prompt.labels, prompt.options)
    # Every step but the last feeds one token back (generate forwards the prompt once).
    tokens = ids.shape[1] + max(0, len(new) - 1)
    return ReferenceCell(prompt.native_index(position), output, None, min(margins, default=0.0),
                         tokens)


def _cloze(model, tokenizer, prompt) -> ReferenceCell:
    """lm-eval's request per option: trailing whitespace of the context joins the
    continuation; the model reads the context's own tokens, then the tokens the whole
    string has past them (docs/runner.md, "Scoring")."""
    scores, tokens = [], 0
    context = prompt.context.rstrip()
    moved = prompt.context[len(context):]
    context_ids = tokenizer(context)["input_ids"]
    for continuation in prompt.continuations:
        whole = tokenizer(context + moved + continuation)["input_ids"]
        fed = context_ids + whole[len(context_ids):]
        logits = model(torch.tensor([fed], device=model.device)).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        scores.append(sum(float(logprobs[t - 1, fed[t]])
                          for t in range(len(context_ids), len(fed))))
        tokens += len(fed)
    normalised = [s / max(len(c) - 1, 1) for s, c in zip(scores, prompt.continuations)]
    pred = max(range(len(normalised)), key=lambda i: (normalised[i], -i))  # first maximum
    ranked = sorted(normalised, reverse=True)
    return ReferenceCell(pred, None, scores, ranked[0] - ranked[1], tokens)
