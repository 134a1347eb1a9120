"""Prompt rendering of the 26 configs (SPEC §2); torch-free so the TUI can show exactly what
any cell saw. docs/prompts.md lists the templates with a real example of every config.

Generation configs (base models get `text`, instruct models get `messages`):

    Question: {question}
    A. {option}            letter   "A. "   paren "(A) "   digit "1. "
    B. {option}
    C. {option}
    D. {option}
    Answer with the letter of the correct option only (A, B, C or D).   <- instruct only
    Answer:                <- the answer cue, in `text` only

The chat user message is the same body without the final "Answer:" line: in a chat the
assistant turn is the cue, and a dangling "Answer:" in a user turn reads as a cut-off
sentence. No system message (several chat templates reject one).

Cloze configs: context "Question: {q}\\nAnswer:" (cloze_qa) or "{q}" (cloze_bare), and the
continuations " {option}" in native order.

Letter-likelihood configs (`o2.digit.lik`, SPEC v5 §2): the generation config's raw `text`
as the context and the labels as the format writes them (" A", " (A)", " 1") as the
continuations, in display order; with +chat the labels (no leading space) follow the chat
template's rendering of the generation config's messages instead, lm-eval's
--apply_chat_template convention. Otherwise modifiers (+bos/+nobos, +raw/+chat) change how
a prompt is tokenised, not its text (runners/plan/item_requests.py, Encoder).

Whitespace: in the generation configs the question and each option are stripped of
leading/trailing whitespace (963 MMLU test questions carry a leading space or a trailing
newline that would leave a stray space or a blank line); inner whitespace and newlines are
kept verbatim. The cloze configs use the item text exactly as it is in the file, as
lm-evaluation-harness does (docs/prompts.md, "Whitespace and text"): their log-likelihoods
are meant to be lm-eval's.
The generation configs of an item start with the same "Question: {q}\\n" stem, and
cloze_qa does too when the question has no outer whitespace, so the runner can reuse the
stem's KV cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Iterable, Union

from fragility_tui.harness.configs import CONFIG_IDS, N_OPTIONS, get_config, item_shuffles
from fragility_tui.items.item import Item
from fragility_tui.harness.parser import DIGIT_LABELS, LETTER_LABELS

# bump when a template changes; recorded with every run. 1.1: cloze text is not stripped
PROMPT_VERSION = "1.1"

QUESTION_PREFIX = "Question: "
ANSWER_CUE = "Answer:"
INSTRUCTION = "Answer with the letter of the correct option only (A, B, C or D)."
_OPTION_LINE = {
    "letter": "{label}. {option}",
    "paren": "({label}) {option}",
    "digit": "{label}. {option}",
    "instruct": "{label}. {option}",
}


@dataclass(frozen=True)
class GenerationPrompt:
    config_id: str
    permutation: tuple[int, ...]  # display position j shows choices[permutation[j]]
    labels: tuple[str, ...]  # ("A","B","C","D") or ("1","2","3","4") for digit
    options: tuple[str, ...]  # option texts in display order (as shown, stripped)
    gold_position: int  # display position of the gold option
    text: str  # the whole raw prompt (base models)
    messages: tuple[dict, ...]  # chat messages for instruct models (template applied by runner)
    examples: tuple[str, ...] = ()  # +kN: the solved examples' item uids, in the order shown

    def native_index(self, position: int) -> int:
        """Native option index shown at display `position`; -1 (unparsed) stays -1."""
        return -1 if position == -1 else self.permutation[position]


@dataclass(frozen=True)
class ClozePrompt:
    config_id: str
    context: str  # "Question: {q}\nAnswer:" (cloze_qa) or "{q}" (cloze_bare)
    continuations: tuple[str, ...]  # " " + option as in the file, native order, no shuffle
    gold: int
    examples: tuple[str, ...] = ()  # +kN: the solved examples' item uids, in the order shown

    @property
    def texts(self) -> tuple[str, ...]:
        """The four full strings whose continuation log-likelihoods are compared."""
        return tuple(self.context + c for c in self.continuations)


@dataclass(frozen=True)
class LabelPrompt:
    """A letter-likelihood config (`{order}.{format}.lik`, SPEC v5 §2): the generation
    config's raw prompt, ending in the answer cue, scored by the log-likelihood of each
    label as the format writes it (" A", " (A)", " 1"), in display order."""

    config_id: str
    permutation: tuple[int, ...]  # display position j shows choices[permutation[j]]
    labels: tuple[str, ...]
    options: tuple[str, ...]
    gold_position: int
    context: str  # the generation config's `text` (+chat: scored after `messages` instead)
    continuations: tuple[str, ...]  # the labels' continuations, display order
    messages: tuple[dict, ...] = ()  # +chat: the generation config's chat messages
    examples: tuple[str, ...] = ()  # +kN: the solved examples' item uids, in the order shown

    def native_index(self, position: int) -> int:
        return -1 if position == -1 else self.permutation[position]

    @property
    def text(self) -> str:
        """The raw prompt (as a generation prompt's `text`)."""
        return self.context


Prompt = Union[GenerationPrompt, ClozePrompt, LabelPrompt]
# how a letter-likelihood config writes its label after the answer cue
_LABEL_CONTINUATION = {"letter": " {label}", "paren": " ({label})", "digit": " {label}"}


def _clean(text: str) -> str:
    return text.strip()


def _check_item(item: Item) -> None:
    if len(item.choices) != N_OPTIONS:
        raise ValueError(f"item {item.item_uid}: {len(item.choices)} choices, expected {N_OPTIONS}")
    if not 0 <= item.gold < N_OPTIONS:
        raise ValueError(f"item {item.item_uid}: gold {item.gold} out of range 0..{N_OPTIONS - 1}")


def _check_permutation(permutation: tuple[int, ...], item_uid: str) -> tuple[int, ...]:
    permutation = tuple(permutation)
    if sorted(permutation) != list(range(N_OPTIONS)):
        raise ValueError(f"item {item_uid}: {permutation!r} is not a permutation of 0..{N_OPTIONS - 1}")
    return permutation


def _generation(item: Item, config_id: str, fmt: str, permutation: tuple[int, ...]) -> GenerationPrompt:
    labels = DIGIT_LABELS if fmt == "digit" else LETTER_LABELS
    options = tuple(_clean(item.choices[native]) for native in permutation)
    lines = [QUESTION_PREFIX + _clean(item.question)]
    lines += [_OPTION_LINE[fmt].format(label=label, option=option)
              for label, option in zip(labels, options)]
    if fmt == "instruct":
        lines.append(INSTRUCTION)
    body = "\n".join(lines)
    return GenerationPrompt(
        config_id=config_id,
        permutation=permutation,
        labels=labels,
        options=options,
        gold_position=permutation.index(item.gold),
        text=f"{body}\n{ANSWER_CUE}",
        messages=({"role": "user", "content": body},),
    )


def _cloze(item: Item, config_id: str, fmt: str) -> ClozePrompt:
    """lm-eval's cloze request: the item text as it is (no stripping), target delimiter " "."""
    question = item.question
    context = f"{QUESTION_PREFIX}{question}\n{ANSWER_CUE}" if fmt == "cloze_qa" else question
    return ClozePrompt(config_id, context, tuple(" " + c for c in item.choices), item.gold)


def render(item: Item, config_id: str, seed: int,
           permutation: tuple[int, ...] | None = None,
           examples: tuple[Item, ...] | None = None) -> Prompt:
    """The prompt of `item` under `config_id`.

    The option order comes from (seed, item_uid, config); pass `permutation` (e.g. the one
    recorded in a cell) to re-render a cell exactly as it was run. Cloze configs ignore it.
    A `+kN` config needs its N solved `examples` (harness/fewshot.py draws them; a cell
    records their uids), shown before the question in the config's own format, native
    order, each with its answer.
    """
    _check_item(item)
    config = get_config(config_id)
    examples = tuple(examples or ())
    if len(examples) != config.shots:
        raise ValueError(f"{config_id} shows {config.shots} solved examples; "
                         f"{len(examples)} given")
    for example in examples:
        _check_item(example)
    if config.scoring == "likelihood":
        return _solved_cloze(_cloze(item, config_id, config.format), examples, config.format)
    if permutation is None:
        permutation = item_shuffles(seed, item.item_uid)[config.shuffle_index]
    prompt = _generation(item, config_id, config.format,
                         _check_permutation(permutation, item.item_uid))
    prompt = _solved_generation(prompt, examples, config.format)
    if config.scoring == "letter_lik":
        return _label(prompt)
    return prompt


FEWSHOT_DELIMITER = "\n\n"  # between examples, and before the question (lm-eval's)


def _solved_generation(prompt: GenerationPrompt, examples: tuple[Item, ...],
                       fmt: str) -> GenerationPrompt:
    """The examples before the prompt: in text, each example's prompt with its answer after
    the cue ("Answer: B"); in chat, a user turn and the assistant's answer each."""
    if not examples:
        return prompt
    texts, messages = [], []
    for example in examples:
        shown = _generation(example, prompt.config_id, fmt, tuple(range(N_OPTIONS)))
        answer = _LABEL_CONTINUATION.get(fmt, " {label}").format(
            label=shown.labels[example.gold]).strip()
        texts.append(f"{shown.text} {answer}")
        messages += [*shown.messages, {"role": "assistant", "content": answer}]
    text = FEWSHOT_DELIMITER.join(texts) + FEWSHOT_DELIMITER + prompt.text
    return replace(prompt, text=text, messages=(*messages, *prompt.messages),
                   examples=tuple(e.item_uid for e in examples))


def _solved_cloze(prompt: ClozePrompt, examples: tuple[Item, ...], fmt: str) -> ClozePrompt:
    """lm-eval's few-shot context: each example's context, the target delimiter and its
    gold option (as in the file), then the question's context."""
    if not examples:
        return prompt
    solved = [_cloze(e, prompt.config_id, fmt).context + " " + e.choices[e.gold]
              for e in examples]
    return replace(prompt, context=FEWSHOT_DELIMITER.join(solved) + FEWSHOT_DELIMITER
                   + prompt.context, examples=tuple(e.item_uid for e in examples))


def _label(prompt: GenerationPrompt) -> LabelPrompt:
    """+chat: the label follows the template's assistant turn as lm-eval's
    --apply_chat_template writes it, without the target delimiter (" A" becomes "A")."""
    config = get_config(prompt.config_id)
    continuations = tuple(_LABEL_CONTINUATION[config.format].format(label=label)
                          for label in prompt.labels)
    chat = config.template == "chat"
    return LabelPrompt(prompt.config_id, prompt.permutation, prompt.labels, prompt.options,
                       prompt.gold_position, prompt.text,
                       tuple(c.lstrip() for c in continuations) if chat else continuations,
                       prompt.messages if chat else (), prompt.examples)


def render_all(item: Item, seed: int) -> dict[str, Prompt]:
    """All 26 prompts of an item, keyed by config id in canonical order."""
    return {config_id: render(item, config_id, seed) for config_id in CONFIG_IDS}


def prompt_text(prompt: Prompt | str) -> str:
    """The raw text a base model reads first: the whole prompt, or the cloze context."""
    if isinstance(prompt, GenerationPrompt):
        return prompt.text
    if isinstance(prompt, (ClozePrompt, LabelPrompt)):
        return prompt.context
    return prompt


def shared_prefix(prompts: Iterable[Prompt | str] | dict[str, Prompt]) -> str:
    """Longest common text prefix of the prompts' raw texts (helps the runner's KV reuse)."""
    if isinstance(prompts, dict):
        prompts = prompts.values()
    texts = [prompt_text(p) for p in prompts]
    return os.path.commonprefix(texts) if texts else ""
