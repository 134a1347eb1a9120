"""Items x configs -> token requests for the scorer, and scorer results -> store cells.

Tokenisation rules (SPEC §2, docs/runner.md, "Scoring"):
- generation, prompt mode chat: the tokenizer's chat template applied to the prompt's
  messages with add_generation_prompt=True and the pinned template arguments
  (runners.models.fingerprint.template_args: thinking off, a fixed date, also for `strftime_now`),
  then encoded without adding special tokens (the template carries whatever BOS it wants),
  as `apply_chat_template(tokenize=True)` does;
- generation, base model: the raw prompt text, encoded with the tokenizer's own default
  special-token setting (BOS iff the tokenizer adds one; recorded as `add_bos`);
- likelihood: lm-evaluation-harness's rule (0.4.13's `_encode_pair`): trailing whitespace
  of the context moves onto the continuation; context + continuation are encoded as one
  string (whole) and the context alone (context_enc); the continuation's tokens are
  whole[len(context_enc):]; the model is fed context_enc + those tokens, not whole (the two
  differ when the tokenizer merges across the boundary, and lm-eval's numbers are the
  former's). The scored tokens are the continuation's.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field, replace
from functools import partial

from fragility_tui.harness.configs import get_config, perm_to_str
from fragility_tui.harness.fewshot import draw_examples
from fragility_tui.items.item import Item
from fragility_tui.harness.parser import is_decided, parse_answer
from fragility_tui.harness.render import ClozePrompt, GenerationPrompt, LabelPrompt, render
# The schema module, not store.store: that one imports duckdb, which the air-gapped GPU box
# lacks (benchmarks/gpu_check.py plans and parses items there).
from fragility_tui.store.schema import CellRow
from runners.plan import numerics
from runners.models.fingerprint import pinned_date, prompt_sha, template_args
from runners.plan.prefix_tree import build_tree, count_tokens
from runners.plan.score_types import BatchResult, GenRequest, LikelihoodRequest


@dataclass
class Encoder:
    tokenizer: object
    is_instruct: bool  # prompt mode chat
    template_args: dict = field(default_factory=dict)

    def generation(self, prompt: GenerationPrompt, *, chat: bool | None = None,
                   bos: str | None = None) -> list[int]:
        """`chat`: through the chat template (None: the run's prompt mode; +chat / +raw
        force it); `bos`: "on" / "off" forces a BOS token (+bos / +nobos)."""
        if self.is_instruct if chat is None else chat:
            text = self.chat_text(prompt.messages)
            return self.with_bos(self.tokenizer(text, add_special_tokens=False)["input_ids"],
                                 bos)
        return self.with_bos(self.tokenizer(prompt.text)["input_ids"], bos)

    def chat_text(self, messages) -> str:
        """The chat template's text of the messages, generation prompt appended (+chat on a
        run in raw mode: with the arguments the template would be pinned with)."""
        args = self.template_args if self.is_instruct else \
            template_args(self.tokenizer.chat_template)
        with pinned_date():
            return self.tokenizer.apply_chat_template(
                list(messages), tokenize=False, add_generation_prompt=True, **args)

    def with_bos(self, ids: list[int], bos: str | None) -> list[int]:
        """The ids with a BOS token forced on or off (None: as encoded). Exactly one BOS
        token is added or removed, so +nobos differs from +bos by that token alone."""
        if bos is None:
            return ids
        bos_id = self.tokenizer.bos_token_id
        has = bool(ids) and bos_id is not None and ids[0] == bos_id
        if bos == "off":
            return ids[1:] if has else ids
        if bos_id is None:
            raise ValueError("+bos: the tokenizer defines no BOS token")
        return ids if has else [bos_id] + ids

    def cloze(self, context: str, continuation: str, *, bos: str | None = None,
              templated: bool = False) -> tuple[list[int], int]:
        """(context_enc + continuation_enc as lm-eval feeds them, index of the first scored
        token = len(context_enc)); `bos` as in `generation`, on both encodings; `templated`:
        the context is a chat template's text (encoded without special tokens)."""
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        special = {"add_special_tokens": False} if templated else {}
        context_enc = self.with_bos(self.tokenizer(context, **special)["input_ids"], bos)
        whole = self.with_bos(self.tokenizer(context + continuation, **special)["input_ids"],
                              bos)
        if not context_enc:  # empty context: condition on a start token, as lm-eval does
            start = self.tokenizer.bos_token_id
            start = self.tokenizer.eos_token_id if start is None else start
            return [start] + whole, 1
        return context_enc + whole[len(context_enc):], len(context_enc)


@dataclass
class ItemPlan:
    """What one item needs in a batch: its prompts and the request keys they produce."""

    item: Item
    prompts: dict  # config_id -> GenerationPrompt | ClozePrompt
    prompt_tokens: dict  # config_id -> tokens forwarded without reuse (cost per cell)
    prompt_shas: dict = field(default_factory=dict)  # config_id -> sha256 of its token ids


def plan_item(encoder: Encoder, item: Item, config_ids: list[str], seed: int,
              gen: list[GenRequest], lik: list[LikelihoodRequest],
              pools: dict | None = None) -> ItemPlan:
    """Render the item's configs and append their requests to `gen` / `lik`. A `+kN`
    config's examples are drawn from `pools` (the run's items by benchmark) by the grid
    seed, the same N for every config of the item (harness/fewshot.py)."""
    plan = ItemPlan(item, {}, {})
    drawn: dict[int, tuple] = {}
    for config_id in config_ids:
        config = get_config(config_id)
        if config.shots and config.shots not in drawn:
            drawn[config.shots] = draw_examples(item, pools or {}, config.shots, seed)
        prompt = render(item, config_id, seed, examples=drawn.get(config.shots))
        plan.prompts[config_id] = prompt
        modifiers = {"bos": config.bos} if config.bos else {}
        if isinstance(prompt, GenerationPrompt):
            if config.template:
                modifiers["chat"] = config.template == "chat"
            tokens = encoder.generation(prompt, **modifiers)
            decided = partial(is_decided, labels=prompt.labels, options=prompt.options)
            gen.append(GenRequest((item.item_uid, config_id), tokens, decided))
            plan.prompt_tokens[config_id] = len(tokens)
            plan.prompt_shas[config_id] = prompt_sha([tokens])
        else:
            total, sequences = 0, []
            context = prompt.context
            if getattr(prompt, "messages", ()):  # a .lik+chat config
                context, modifiers["templated"] = encoder.chat_text(prompt.messages), True
            for option, continuation in enumerate(prompt.continuations):
                tokens, scored_from = encoder.cloze(context, continuation, **modifiers)
                lik.append(LikelihoodRequest((item.item_uid, config_id, option), tokens,
                                             scored_from))
                total += len(tokens)
                sequences.append(tokens)
            plan.prompt_tokens[config_id] = total
            plan.prompt_shas[config_id] = prompt_sha(sequences)
    return plan


def normalised_scores(loglikelihoods: list[float], prompt: ClozePrompt) -> list[float]:
    """acc_norm scores: ll / option length in characters (no leading space)."""
    # An empty option counts as length 1 (lm-eval would divide by zero).
    return [ll / max(len(continuation) - 1, 1)
            for ll, continuation in zip(loglikelihoods, prompt.continuations)]


def normalised_choice(loglikelihoods: list[float], prompt: ClozePrompt) -> int:
    """acc_norm: argmax of the normalised scores; the first maximum on ties."""
    best, best_score = -1, float("-inf")
    for option, score in enumerate(normalised_scores(loglikelihoods, prompt)):
        if score > best_score:
            best, best_score = option, score
    return best


def cells_for(plan: ItemPlan, result: BatchResult, model: str, run_id: str | None,
              ms_per_token: float, tolerance: dict | None = None) -> list[CellRow]:
    """The item's cells; `tolerance` (runners.plan.numerics.tolerance of the run's dtype) makes
    each cell's near_tie from its margin."""
    tolerance = tolerance or numerics.tolerance("fp32")
    rows = []
    uid = plan.item.item_uid
    for config_id, prompt in plan.prompts.items():
        if isinstance(prompt, GenerationPrompt):
            out = result.generations[(uid, config_id)]
            pred = prompt.native_index(parse_answer(out.text, prompt.labels, prompt.options))
            tokens, ms = _cost(result, [(uid, config_id)], plan.prompt_tokens[config_id],
                               ms_per_token, out.new_tokens)
            rows.append(CellRow(model, uid, config_id, pred == plan.item.gold, pred,
                                perm_to_str(prompt.permutation),
                                out.text if out.stored_text is None else out.stored_text,
                                None, tokens,
                                ms, run_id, plan.prompt_shas.get(config_id), out.margin,
                                numerics.near_tie(out.margin, tolerance["generate"])))
        elif isinstance(prompt, LabelPrompt):
            rows.append(_label_cell(plan, prompt, result, model, run_id, ms_per_token,
                                    tolerance))
        else:
            keys = [(uid, config_id, i) for i in range(4)]
            scores = [result.loglikelihoods[key][0] for key in keys]
            pred = normalised_choice(scores, prompt)
            margin = numerics.likelihood_margin(normalised_scores(scores, prompt))
            tokens, ms = _cost(result, keys, plan.prompt_tokens[config_id], ms_per_token)
            rows.append(CellRow(model, uid, config_id, pred == plan.item.gold, pred, None,
                                None, scores, tokens, ms, run_id,
                                plan.prompt_shas.get(config_id), margin,
                                numerics.near_tie(margin, tolerance["likelihood"])))
    # +kN: the examples a cell was shown, so it re-renders exactly (cells.examples)
    return [replace(r, examples=list(plan.prompts[r.config_id].examples))
            if plan.prompts[r.config_id].examples else r for r in rows]


def _label_cell(plan: ItemPlan, prompt: LabelPrompt, result: BatchResult, model: str,
                run_id: str | None, ms_per_token: float, tolerance: dict) -> CellRow:
    """A letter-likelihood cell: the label with the highest log-likelihood (first maximum;
    no length normalisation), its scores stored in native option order like a cloze
    cell's (the cell's permutation says where each was shown)."""
    uid, config_id = plan.item.item_uid, prompt.config_id
    keys = [(uid, config_id, i) for i in range(len(prompt.continuations))]
    shown = [result.loglikelihoods[key][0] for key in keys]
    position = shown.index(max(shown))
    native = [0.0] * len(shown)
    for j, k in enumerate(prompt.permutation):
        native[k] = shown[j]
    pred = prompt.native_index(position)
    margin = numerics.likelihood_margin(shown)
    tokens, ms = _cost(result, keys, plan.prompt_tokens[config_id], ms_per_token)
    return CellRow(model, uid, config_id, pred == plan.item.gold, pred,
                   perm_to_str(prompt.permutation), None, native, tokens, ms, run_id,
                   plan.prompt_shas.get(config_id), margin,
                   numerics.near_tie(margin, tolerance["likelihood"]))


def _cost(result: BatchResult, keys: list, prompt_tokens: int, ms_per_token: float,
          new_tokens: int = 0) -> tuple[int, float]:
    """(tokens, ms) of a cell: a served backend's own counts (usage, request seconds)
    where it reported them for every request of the cell, else our token count and the
    batch's time per token."""
    served = [result.prompt_tokens.get(key) for key in keys]
    if all(n is not None for n in served):
        return sum(served) + new_tokens, 1000.0 * sum(result.seconds.get(k, 0.0) for k in keys)
    tokens = prompt_tokens + new_tokens
    return tokens, tokens * ms_per_token


@dataclass
class PlannedItem:
    """One item's prompts, rendered and tokenised, with the size of its prompt tree."""

    plan: object  # runners.plan.item_requests.ItemPlan
    gen: list
    lik: list
    unique_tokens: int


def seeded_order(todo: list, seed: int) -> list:
    """(item, configs) pairs in a seeded random order that depends only on the seed and
    each item's uid: a resumed run (fewer items left) and every shard keep the relative
    order of the first session, and any prefix is a uniform sample of the items. (It
    replaces longest-first: an out-of-memory batch now shows up later, and the batch
    budget's shrink-and-retry handles it there too.)"""
    def key(pair) -> bytes:
        return hashlib.sha256(f"{seed}\x00{pair[0].item_uid}".encode()).digest()
    return sorted(todo, key=key)


class ItemPlanner:
    """Items turned into scorer requests as batches need them (tokenising a whole large
    item set up front would hold every token list in memory at once)."""

    def __init__(self, loaded, todo: list, seed: int, encoder=None, *,
                 own_tokenizer: bool = False, pools: dict | None = None,
                 processes=None):
        """`pools`: the run's whole item set by benchmark, which +kN examples come from
        (not only the items left to do: a resumed run draws the same examples).
        `processes`: a make_pool(encoder, todo, seed, pools) whose `take()` gives the
        items' plans in order, made in other processes ahead of the batches
        (runners.run.plan_pool); None: planned here, on the caller's thread."""
        self.todo, self.seed, self.next, self.pools = todo, seed, 0, pools
        # own_tokenizer: planning runs on the host worker (runners.run.host_work) while the
        # scorer decodes with the model's tokenizer on the main thread; a Rust tokenizer
        # used from two threads can fail ("Already borrowed"), so the planner gets a copy.
        tokenizer = copy.deepcopy(loaded.tokenizer) if own_tokenizer else loaded.tokenizer
        # A served backend brings its own encoder (runners.backends.openai.backend.ServedEncoder).
        self.encoder = encoder or Encoder(tokenizer, loaded.is_instruct,
                                          getattr(loaded, "template_args", None) or {})
        self.ready: list[PlannedItem] = []
        self.processes = processes(self.encoder, todo, seed, pools) if processes else None

    def __bool__(self) -> bool:
        return bool(self.ready) or self.next < len(self.todo)

    def batch(self, budget) -> list[PlannedItem]:
        """The next items, while the batch's unique prompt tokens fit the budget."""
        chunk, tokens = [], 0
        while self and budget.fits(len(chunk), tokens):
            planned = self.ready.pop(0) if self.ready else self._plan()
            chunk.append(planned)
            tokens += planned.unique_tokens
        return chunk

    def put_back(self, chunk: list[PlannedItem]) -> None:
        self.ready[:0] = chunk

    def close(self) -> None:
        """Stop the planning processes, if any (a run's end, whatever its outcome)."""
        if self.processes is not None:
            self.processes.close()

    def _plan(self) -> PlannedItem:
        item, configs = self.todo[self.next]
        self.next += 1
        if self.processes is not None:
            return self.processes.take()
        return plan_one(self.encoder, item, configs, self.seed, self.pools)


def plan_one(encoder, item, configs, seed: int, pools) -> PlannedItem:
    """One item's prompts, rendered and tokenised, and the size of its prompt tree."""
    gen, lik = [], []
    plan = plan_item(encoder, item, configs, seed, gen, lik, pools)
    unique = count_tokens(build_tree([r.tokens for r in gen] + [r.tokens for r in lik]))
    return PlannedItem(plan, gen, lik, unique)
