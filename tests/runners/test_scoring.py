"""Scoring core on a tiny random Llama: all 26 configs against a plain reference loop,
batch-size invariance, prefix-reuse invariance, token accounting."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.harness.configs import CONFIG_IDS  # noqa: E402
from fragility_tui.items.item import Item  # noqa: E402
from fragility_tui.harness.parser import parse_answer  # noqa: E402
from fragility_tui.harness.render import GenerationPrompt  # noqa: E402
from runners.plan.prefix_tree import build_tree, count_tokens  # noqa: E402
from runners.plan.item_requests import Encoder, cells_for, normalised_choice, plan_item  # noqa: E402
from runners.backends.transformers.scoring import Scorer  # noqa: E402
from tiny_models import make_model  # noqa: E402

ITEMS = [
    Item("toy/1", "toy", None, "Which gas do plants absorb from the air?",
         ("oxygen", "nitrogen", "carbon dioxide", "helium"), 2),
    Item("toy/2", "toy", "geo", "What is the capital of France?",
         ("Paris", "Rome", "Berlin", "Madrid"), 0),
    Item("toy/3", "toy", None, "A man is sitting on a roof. He",
         ("starts pulling up roofing.", "is ripping level tiles off.",
          "holds a rope.", "sings a song about water."), 0),
]
SEED = 0


def _requests(tokenizer, items, instruct=True, configs=CONFIG_IDS):
    gen, lik = [], []
    plans = [plan_item(Encoder(tokenizer, instruct), it, list(configs), SEED, gen, lik)
             for it in items]
    return plans, gen, lik


def _scorer(model, tokenizer, **kw):
    return Scorer(model, tokenizer, {tokenizer.eos_token_id}, **kw)


def _reference_generation(model, tokenizer, tokens):
    """The plain loop: one prompt, model.generate, no batching, no shared cache."""
    out = model.generate(torch.tensor([tokens]), attention_mask=torch.ones(1, len(tokens), dtype=torch.long),
                         max_new_tokens=16, do_sample=False,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, len(tokens):], skip_special_tokens=True)


def _reference_loglikelihood(model, tokens, scored_from):
    """A full forward of the whole sequence, log-softmax, sum over the continuation."""
    logits = model(torch.tensor([tokens])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    return sum(float(lp[t - 1, tokens[t]]) for t in range(scored_from, len(tokens)))


def _assert_matches_reference(model, tokenizer, scorer, instruct, **score_kw):
    plans, gen, lik = _requests(tokenizer, ITEMS, instruct)
    result = scorer.score(gen, lik, **score_kw)
    with torch.inference_mode():
        for request in gen:
            ours = result.generations[request.key]
            reference = _reference_generation(model, tokenizer, request.tokens)
            # Early stop may cut the text once the parse is fixed: ours is a prefix.
            assert reference.startswith(ours.text), (request.key, ours, reference)
            prompt = plans[[p.item.item_uid for p in plans].index(request.key[0])].prompts[request.key[1]]
            assert parse_answer(ours.text, prompt.labels, prompt.options) == \
                parse_answer(reference, prompt.labels, prompt.options)
        for request in lik:
            ll, _ = result.loglikelihoods[request.key]
            assert ll == pytest.approx(_reference_loglikelihood(model, request.tokens,
                                                                request.scored_from), abs=1e-4)
    return plans, result


@pytest.mark.parametrize("instruct", [True, False], ids=["chat", "base"])
def test_all_26_configs_match_a_plain_reference(tiny_model, tiny_tokenizer, instruct):
    scorer = _scorer(tiny_model, tiny_tokenizer)
    assert scorer.packing  # a Llama honours tree masks: fragments are packed
    plans, result = _assert_matches_reference(tiny_model, tiny_tokenizer, scorer, instruct)
    rows = [row for plan in plans for row in cells_for(plan, result, "tiny", None, 0.0)]
    assert len(rows) == len(ITEMS) * 26
    assert {r.config_id for r in rows} == set(CONFIG_IDS)
    for row in rows:
        assert row.correct == (row.pred == next(p.item.gold for p in plans
                                                if p.item.item_uid == row.item_uid))
        if row.config_id.startswith("cloze"):
            assert len(row.scores) == 4 and row.permutation is None
        else:
            assert len(row.permutation) == 4 and row.raw_output is not None


@pytest.mark.parametrize("pack_tokens", [0, 24, 256], ids=["node-rows", "small-fragments",
                                                          "fragments"])
@pytest.mark.parametrize("max_slots", [48, 16384], ids=["tight-budget", "roomy-budget"])
def test_every_layout_and_budget_matches_the_reference(tiny_model, tiny_tokenizer, pack_tokens,
                                                       max_slots):
    """One node per row (2D masks), small and large packed fragments (4D tree masks), a
    budget that forces a call per row or two, and one that fits the batch: same answers."""
    scorer = _scorer(tiny_model, tiny_tokenizer, pack_tokens=pack_tokens)
    assert scorer.packing == (pack_tokens > 0)
    _assert_matches_reference(tiny_model, tiny_tokenizer, scorer, True, max_slots=max_slots)


def _tiny_gemma3(tokenizer, layer_types):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                              num_hidden_layers=len(layer_types), num_attention_heads=2,
                              num_key_value_heads=1, head_dim=16, initializer_range=0.5,
                              sliding_window=8, layer_types=layer_types,
                              max_position_embeddings=1024,
                              bos_token_id=tokenizer.bos_token_id,
                              eos_token_id=tokenizer.eos_token_id,
                              pad_token_id=tokenizer.pad_token_id)
    model = Gemma3ForCausalLM(config).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


@pytest.mark.parametrize("layer_types", [["sliding_attention", "full_attention"],
                                         ["sliding_attention", "sliding_attention"]],
                         ids=["mixed", "all-sliding"])
@pytest.mark.parametrize("pack_tokens", [0, 256], ids=["node-rows", "fragments"])
def test_sliding_window_attention_matches_the_reference(tiny_tokenizer, layer_types, pack_tokens):
    """Gemma 3 style layers with an 8-token window, prompts of 40-90 tokens: the tree masks
    window by logical position, per layer type, as transformers' own masks do."""
    model = _tiny_gemma3(tiny_tokenizer, layer_types)
    scorer = _scorer(model, tiny_tokenizer, pack_tokens=pack_tokens)
    assert scorer.calls.sliding_window == 8
    _assert_matches_reference(model, tiny_tokenizer, scorer, True, max_slots=512)


def _all_nodes(gen, lik):
    """Every node of the batch's tree, marked as the scorer marks it."""
    from runners.plan.prefix_tree import mark_scored_leaves

    roots = build_tree([r.tokens for r in gen] + [r.tokens for r in lik])
    mark_scored_leaves(roots, len(gen))
    nodes, stack = [], list(roots)
    while stack:
        nodes.append(stack.pop())
        stack.extend(nodes[-1].children)
    return nodes


def test_prefill_batches_rows_and_the_pool_holds_each_token_once(tiny_model, tiny_tokenizer):
    """The batch's tree goes through the decoder in a handful of calls, not one per node,
    and the KV pool is exactly the tree's unique tokens (plus the zero padding slot)."""
    from runners.backends.transformers import scoring

    scorer = _scorer(tiny_model, tiny_tokenizer)
    _, gen, lik = _requests(tiny_tokenizer, ITEMS)
    pools = []
    original = scoring.KVPool.__init__

    def spy(self, capacity, scratch=None):
        original(self, capacity, scratch)
        pools.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scoring.KVPool, "__init__", spy)
        result = scorer.score(gen, lik)
    nodes, stack = 0, build_tree([r.tokens for r in gen] + [r.tokens for r in lik])
    while stack:
        node = stack.pop()
        nodes += bool(node.segment)
        stack.extend(node.children)
    # A likelihood-only leaf's last token is scored from the position before it, never
    # forwarded (as lm-eval drops it): the pool holds the rest of the tree's tokens.
    trimmed = sum(node.trim_last for node in _all_nodes(gen, lik))
    assert trimmed >= len(ITEMS) * 4  # at least each cloze option's leaf
    assert pools[0].used == pools[0].capacity == result.stats.unique_prompt_tokens - trimmed + 1
    assert result.stats.prompt_tokens == result.stats.unique_prompt_tokens - trimmed
    assert pools[0].keys == []  # released once decoding had its caches
    assert result.stats.prefill_calls < nodes / 10  # not a call per node
    assert result.stats.prompt_padding < 0.1 * result.stats.prompt_tokens
    # Every leaf decodes in the same call per step; a last token is never fed back.
    longest = max(g.new_tokens for g in result.generations.values())
    assert result.stats.decode_calls == longest - 1


def _flatten(result):
    gens = {k: (v.text, v.new_tokens) for k, v in result.generations.items()}
    return gens, result.loglikelihoods


def _assert_same(a, b):
    gens_a, ll_a = _flatten(a)
    gens_b, ll_b = _flatten(b)
    assert gens_a == gens_b
    assert ll_a.keys() == ll_b.keys()
    for key in ll_a:
        assert ll_a[key][0] == pytest.approx(ll_b[key][0], abs=1e-4)


def test_results_do_not_depend_on_batch_size(tiny_model, tiny_tokenizer):
    scorer = _scorer(tiny_model, tiny_tokenizer)
    _, gen, lik = _requests(tiny_tokenizer, ITEMS)
    together = scorer.score(gen, lik)
    merged = None
    for item in ITEMS:  # one item per batch
        _, g, l_ = _requests(tiny_tokenizer, [item])
        part = scorer.score(g, l_)
        if merged is None:
            merged = part
        else:
            merged.generations.update(part.generations)
            merged.loglikelihoods.update(part.loglikelihoods)
    _assert_same(together, merged)


def test_results_do_not_depend_on_prefix_reuse(tiny_model, tiny_tokenizer):
    _, gen, lik = _requests(tiny_tokenizer, ITEMS)
    shared = _scorer(tiny_model, tiny_tokenizer, prefix_reuse=True).score(gen, lik)
    alone = _scorer(tiny_model, tiny_tokenizer, prefix_reuse=False).score(gen, lik)
    _assert_same(shared, alone)
    # Reuse forwards the tree's unique tokens; no reuse forwards every prompt whole; either
    # way less each likelihood-only leaf's last token (scored, never forwarded).
    trimmed = sum(node.trim_last for node in _all_nodes(gen, lik))
    assert shared.stats.prompt_tokens == shared.stats.unique_prompt_tokens - trimmed
    assert alone.stats.prompt_tokens == alone.stats.total_prompt_tokens - len(lik)
    assert shared.stats.prompt_tokens < 0.6 * alone.stats.prompt_tokens


def test_generation_stops_early_once_decided(tiny_model, tiny_tokenizer):
    """A decided predicate stops a row at its first token; EOS/length rules still hold."""
    _, gen, _ = _requests(tiny_tokenizer, ITEMS[:1], configs=["o0.letter", "o1.paren"])
    always = [type(r)(r.key, r.tokens, lambda text: True) for r in gen]
    result = _scorer(tiny_model, tiny_tokenizer).score(always, [])
    # Stops at the first token, or the first whole character (a byte-level token can be
    # half a UTF-8 character, which is never judged).
    assert all(g.stop == "decided" and g.new_tokens <= 3 for g in result.generations.values())
    # Every generated token but a row's last is fed back: nothing forwarded needlessly.
    assert result.stats.decode_tokens == sum(g.new_tokens - 1 for g in result.generations.values())
    never = [type(r)(r.key, r.tokens, lambda text: False) for r in gen]
    result = _scorer(tiny_model, tiny_tokenizer, max_new_tokens=5).score(never, [])
    for g in result.generations.values():
        assert g.stop in ("eos", "length") and g.new_tokens <= 5


def test_prefix_tree_counts_and_leaves():
    seqs = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2], [7, 8], [1, 2, 3, 4]]
    roots = build_tree(seqs)
    assert count_tokens(roots) == 4 + 1 + 2  # 1 2 3 4 | 5 | 7 8
    found = {}
    stack = [(r, []) for r in roots]
    while stack:
        node, prefix = stack.pop()
        path = prefix + node.segment
        for index in node.requests:
            found[index] = path
        stack.extend((c, path) for c in node.children)
    assert found == dict(enumerate(seqs))  # every request ends at a node spelling it
    assert count_tokens(build_tree(seqs, share=False)) == sum(map(len, seqs))


def test_acc_norm_divides_by_characters_and_takes_the_first_maximum():
    from fragility_tui.harness.render import render

    item = Item("toy/n", "toy", None, "q", ("ab", "abcd", "x", "abcd"), 1)
    prompt = render(item, "cloze_qa", 0)
    # raw: option 2 best; per character: -2/2=-1, -4/4=-1, -3/1=-3, -4/4=-1 -> first max 0
    assert normalised_choice([-2.0, -4.0, -1.5 * 2, -4.0], prompt) == 0
    assert normalised_choice([-3.0, -2.0, -9.0, -1.0], prompt) == 3


def test_generation_prompts_use_the_chat_template_only_for_instruct(tiny_tokenizer):
    item = ITEMS[1]
    from fragility_tui.harness.render import render

    prompt = render(item, "o0.letter", SEED)
    assert isinstance(prompt, GenerationPrompt)
    chat = tiny_tokenizer.decode(Encoder(tiny_tokenizer, True).generation(prompt))
    raw = tiny_tokenizer.decode(Encoder(tiny_tokenizer, False).generation(prompt))
    assert chat.startswith("<|im_start|>user\n") and chat.endswith("<|im_start|>assistant\n")
    assert raw == prompt.text


def test_the_output_head_is_split_off_and_batched(tiny_model, tiny_tokenizer):
    """The decoder runs per node and the head once per batch; same results as a scorer that
    takes full-model logits at every node (the fallback for models that cannot be split)."""
    split = _scorer(tiny_model, tiny_tokenizer)
    assert split.calls.backbone is tiny_model.get_decoder()
    whole = _scorer(tiny_model, tiny_tokenizer)
    whole.calls.backbone, whole.calls.head = tiny_model, lambda logits: logits.float()
    _, gen, lik = _requests(tiny_tokenizer, ITEMS)
    _assert_same(split.score(gen, lik), whole.score(gen, lik))


def test_a_softcapped_head_is_split_with_its_softcap(tiny_tokenizer):
    """Gemma-style final-logit soft-capping is part of the split head."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from runners.backends.transformers.model_probe import cache_keyword, split_output_head

    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=len(tiny_tokenizer), hidden_size=32,
                              intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              num_key_value_heads=1, head_dim=16, initializer_range=0.5,
                              final_logit_softcapping=3.0)
    model = Gemma3ForCausalLM(config).eval()
    decoder, head, _ = split_output_head(model, cache_keyword(model), torch.device("cpu"))
    assert decoder is model.get_decoder()
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        expected = model(input_ids=ids).logits[0]
        assert torch.allclose(head(decoder(input_ids=ids).last_hidden_state[0]), expected,
                              atol=1e-5)
        assert expected.abs().max() <= 3.0  # the cap is really applied


def test_a_head_that_does_not_reproduce_the_model_falls_back(tiny_tokenizer):
    """A model whose forward does more than decoder + head gets whole-model logits."""
    from transformers import LlamaForCausalLM

    from runners.backends.transformers.model_probe import cache_keyword, split_output_head

    class DoubledLogits(LlamaForCausalLM):
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits = out.logits * 2
            return out

    model = DoubledLogits(make_model(tiny_tokenizer).config).eval()
    backbone, head, _ = split_output_head(model, cache_keyword(model), torch.device("cpu"))
    assert backbone is model
    logits = torch.randn(2, 5)
    assert torch.equal(head(logits), logits)


def test_pending_logprobs_send_a_shared_parent_row_through_the_head_once():
    """Four children scoring from one parent's last position: the head sees that row once,
    and every log-probability equals the plain log-softmax at its target."""
    import torch

    from runners.backends.transformers.prefill import PendingLogprobs

    torch.manual_seed(0)
    weight = torch.randn(50, 8)
    seen = []

    def head(rows):
        seen.append(len(rows))
        return rows @ weight.T

    pending, parent = PendingLogprobs(), torch.randn(8)
    children = [(torch.randn(k, 8), list(range(k + 1))) for k in (1, 2, 3, 0)]
    spans = [pending.add(rows, targets, lead_nan=False, shared_first=parent)
             for rows, targets in children]
    got = pending.resolve(head)
    assert sum(seen) == 1 + 1 + 2 + 3  # the parent's row once, then each child's own rows
    for span, (rows, targets) in zip(spans, children):
        expected = torch.log_softmax(torch.cat([parent[None], rows]) @ weight.T, dim=-1)
        assert torch.allclose(got[span], expected[torch.arange(len(targets)), targets],
                              atol=1e-5)


def test_the_plain_loops_batched_generate_answers_as_one_prompt_at_a_time(tiny_model,
                                                                          tiny_tokenizer):
    """plain_loop.reference_cells (an item's generation prompts in one left-padded
    model.generate, what `make test` checks SmolLM2 against) gives reference_cell's text
    and answer for every config, away from float-noise ties, and the same scores."""
    from runners.backends.transformers.plain_loop import reference_cell, reference_cells

    compared = 0
    with torch.inference_mode():
        for item in ITEMS:
            together = reference_cells(tiny_model, tiny_tokenizer, item, CONFIG_IDS, SEED,
                                       chat=True)
            assert list(together) == list(CONFIG_IDS)
            for config_id, batched in together.items():
                alone = reference_cell(tiny_model, tiny_tokenizer, item, config_id, SEED,
                                       chat=True)
                if alone.scores is not None:
                    assert batched.scores == alone.scores and batched.pred == alone.pred
                    continue
                if min(alone.margin, batched.margin) < 1e-4:
                    continue  # a float-noise tie may go either way
                assert (batched.output, batched.pred) == (alone.output, alone.pred), config_id
                assert batched.margin == pytest.approx(alone.margin, abs=1e-4)
                compared += 1
    assert compared >= len(ITEMS) * 24 // 2, compared
