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
from fragility_tui.harness.configs import get_config
from fragility_tui.harness.render import GenerationPrompt, LabelPrompt, render


@dataclass
class ReferenceCell:
    pred: int  # native option index, -1 = unparsed
    output: str | None = None  # generated text (generation configs)
    scores: list[float] | None = None  # raw log-likelihoods, native order (cloze, .lik)
    margin: float = float("inf")  # closeness to a tie: min top-2 logit gap over the greedy
    # steps (generation) or the top-2 gap of the normalised scores (cloze)
    tokens: int = 0  # tokens forwarded to produce this cell


class ModelCalls:
    """The plain loop's only two uses of the model, given exact token ids: greedy generation
    over left-padded rows, and a continuation's log-likelihood. Everything else (rendering,
    tokenising, parsing, normalising) happens around them, so a check may put a memo of
    these calls, keyed by their inputs and the model's identity, in their place
    (tests/runners/reference_memo.py)."""

    def greedy(self, model, rows: list[list[int]], pad: int,
               max_new_tokens: int) -> list[tuple[list[int], list[float]]]:
        """`model.generate`, greedy, over the rows left-padded into one batch (one row: no
        padding at all): per row the new token ids (padding after a stop included) and each
        step's top-2 logit gap."""
        width = max(len(row) for row in rows)
        ids = torch.tensor([[pad] * (width - len(row)) + row for row in rows],
                           device=model.device)
        attention = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows],
                                 device=model.device)
        out = model.generate(ids, attention_mask=attention, do_sample=False,
                             max_new_tokens=max_new_tokens, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=pad)
        steps = len(out.scores)
        return [(out.sequences[r, width:].tolist(),
                 [float(top[0] - top[1]) for top in
                  (torch.topk(out.scores[k][r].float(), 2).values for k in range(steps))])
                for r in range(len(rows))]

    def loglikelihood(self, model, fed: list[int], start: int) -> float:
        """The summed log-probability of fed[start:] given what precedes each token: one
        full forward of `fed`."""
        logits = model(torch.tensor([fed], device=model.device)).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        return sum(float(logprobs[t - 1, fed[t]]) for t in range(start, len(fed)))


DIRECT = ModelCalls()


@torch.no_grad()
def reference_cell(model, tokenizer, item: Item, config_id: str, seed: int,
                   max_new_tokens: int = 16, *, chat: bool | None = None,
                   template_args: dict | None = None, examples=None,
                   calls: ModelCalls = DIRECT) -> ReferenceCell:
    """`chat`: prompt through the chat template (the run's prompt mode); None: whenever the
    tokenizer has one; a config's +raw / +chat overrides it, and its +bos / +nobos forces a
    BOS token on or off. `template_args`: the run's pinned template arguments; `examples`:
    a +kN config's solved examples; `calls`: how the model is called (ModelCalls)."""
    prompt = render(item, config_id, seed, examples=examples)
    if isinstance(prompt, GenerationPrompt):
        ids = _generation_ids(tokenizer, prompt, config_id, chat, template_args)
        return _generate(model, tokenizer, [(prompt, ids)], max_new_tokens, calls)[0]
    return _scored_cell(model, tokenizer, prompt, config_id, calls)


@torch.no_grad()
def reference_cells(model, tokenizer, item: Item, config_ids, seed: int,
                    max_new_tokens: int = 16, *, chat: bool | None = None,
                    template_args: dict | None = None,
                    calls: ModelCalls = DIRECT) -> dict[str, ReferenceCell]:
    """reference_cell for each of an item's configs, its generation configs in one
    `model.generate` call over their left-padded prompts (transformers' own batched
    generation: a weight read per step for all of them, where one prompt at a time reads
    the weights once per prompt and step, so this is several times faster on a CPU). The
    padding changes the arithmetic, not the method: answers agree with reference_cell
    except where a step's top two logits are within float noise."""
    cells, generation = {}, []
    for config_id in config_ids:
        prompt = render(item, config_id, seed)
        if isinstance(prompt, GenerationPrompt):
            generation.append((config_id, prompt, _generation_ids(tokenizer, prompt,
                                                                  config_id, chat,
                                                                  template_args)))
        else:
            cells[config_id] = _scored_cell(model, tokenizer, prompt, config_id, calls)
    if generation:
        done = _generate(model, tokenizer, [(prompt, ids) for _, prompt, ids in generation],
                         max_new_tokens, calls)
        cells.update((config_id, cell) for (config_id, _, _), cell in zip(generation, done))
    return {config_id: cells[config_id] for config_id in config_ids}


def _scored_cell(model, tokenizer, prompt, config_id: str, calls: ModelCalls) -> ReferenceCell:
    bos = get_config(config_id).bos
    if isinstance(prompt, LabelPrompt):
        return _labels(model, tokenizer, prompt, bos, calls)
    return _cloze(model, tokenizer, prompt, bos, calls)


def _ids(tokenizer, text: str, bos: str | None, **kwargs) -> list[int]:
    """The text's ids, a BOS token forced on ("on") or off ("off") at the start."""
    ids = list(tokenizer(text, **kwargs)["input_ids"])
    first_is_bos = bool(ids) and ids[0] == tokenizer.bos_token_id
    if bos == "off" and first_is_bos:
        return ids[1:]
    if bos == "on" and not first_is_bos:
        return [tokenizer.bos_token_id] + ids
    return ids


def _generation_ids(tokenizer, prompt: GenerationPrompt, config_id: str, chat: bool | None,
                    template_args: dict | None) -> list[int]:
    """The prompt's ids: through the chat template when the run's mode (or the config's
    +chat / +raw) says so, a BOS token forced on or off by +bos / +nobos."""
    config = get_config(config_id)
    chat = bool(tokenizer.chat_template) if chat is None else chat
    if config.template is not None:
        chat = config.template == "chat"
    if not chat:
        return _ids(tokenizer, prompt.text, config.bos)
    template_args = template_args or {}
    if not template_args and tokenizer.chat_template:
        from runners.models.fingerprint import template_args as pinned

        template_args = pinned(tokenizer.chat_template)
    text = tokenizer.apply_chat_template(list(prompt.messages), tokenize=False,
                                         add_generation_prompt=True, **template_args)
    return _ids(tokenizer, text, config.bos, add_special_tokens=False)


def _generate(model, tokenizer, prompts: list[tuple[GenerationPrompt, list[int]]],
              max_new_tokens: int, calls: ModelCalls) -> list[ReferenceCell]:
    """Greedy generation over the prompts' ids in one batch (ModelCalls.greedy); per prompt
    its text up to the first end-of-sequence token, and the smallest top-2 logit gap over
    the steps that produced it."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    generated = calls.greedy(model, [row for _, row in prompts], pad, max_new_tokens)
    stops = _eos_ids(model, tokenizer)
    cells = []
    for (prompt, row), (new, gaps) in zip(prompts, generated):
        ends = [k for k, token in enumerate(new) if token in stops]
        new = new[:ends[0] + 1] if ends else new  # the rest is padding after the stop
        output = tokenizer.decode(new, skip_special_tokens=True)
        margins = gaps[:len(new)]
        position = parse_answer(output, prompt.labels, prompt.options)
        # Every step but the last feeds one token back (generate forwards the prompt once).
        tokens = len(row) + max(0, len(new) - 1)
        cells.append(ReferenceCell(prompt.native_index(position), output, None,
                                   min(margins, default=0.0), tokens))
    return cells


def _eos_ids(model, tokenizer) -> set[int]:
    """The tokens generate stops a row at (its generation config's, else the tokenizer's)."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    return set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}


def _loglikelihoods(model, tokenizer, context: str, continuations, bos: str | None,
                    calls: ModelCalls, **encode) -> tuple[list[float], int]:
    """lm-eval's request per continuation: trailing whitespace of the context joins the
    continuation; the model reads the context's own tokens, then the tokens the whole
    string has past them (docs/runner.md, "Scoring")."""
    scores, tokens = [], 0
    stripped = context.rstrip()
    moved = context[len(stripped):]
    context_ids = _ids(tokenizer, stripped, bos, **encode)
    for continuation in continuations:
        whole = _ids(tokenizer, stripped + moved + continuation, bos, **encode)
        fed = context_ids + whole[len(context_ids):]
        scores.append(calls.loglikelihood(model, fed, len(context_ids)))
        tokens += len(fed)
    return scores, tokens


def _first_max(values: list[float]) -> tuple[int, float]:
    """(index of the first maximum, best minus second best)."""
    best = max(range(len(values)), key=lambda i: (values[i], -i))
    ranked = sorted(values, reverse=True)
    return best, ranked[0] - ranked[1]


def _cloze(model, tokenizer, prompt, bos: str | None, calls: ModelCalls) -> ReferenceCell:
    """acc_norm: the log-likelihood over the option's length in characters."""
    scores, tokens = _loglikelihoods(model, tokenizer, prompt.context, prompt.continuations,
                                     bos, calls)
    normalised = [s / max(len(c) - 1, 1) for s, c in zip(scores, prompt.continuations)]
    pred, margin = _first_max(normalised)
    return ReferenceCell(pred, None, scores, margin, tokens)


def _labels(model, tokenizer, prompt: LabelPrompt, bos: str | None,
            calls: ModelCalls) -> ReferenceCell:
    """Letter likelihood: the label with the highest log-likelihood, unnormalised; scores
    returned in native option order."""
    context, encode = prompt.context, {}
    if prompt.messages:  # +chat: the labels follow the template's assistant turn
        from runners.models.fingerprint import template_args

        context = tokenizer.apply_chat_template(
            list(prompt.messages), tokenize=False, add_generation_prompt=True,
            **template_args(tokenizer.chat_template))
        encode = {"add_special_tokens": False}
    shown, tokens = _loglikelihoods(model, tokenizer, context, prompt.continuations, bos,
                                    calls, **encode)
    position, margin = _first_max(shown)
    native = [shown[prompt.permutation.index(k)] for k in range(len(shown))]
    return ReferenceCell(prompt.native_index(position), None, native, margin, tokens)
