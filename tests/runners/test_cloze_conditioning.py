"""Likelihood configs condition exactly as lm-evaluation-harness does (docs/runner.md,
"Scoring"): the model reads context_enc + continuation_enc, where continuation_enc =
whole_enc[len(context_enc):], not whole_enc. The two differ only when the tokenizer merges
across the boundary, so these tests use a tokenizer that does (tiny_models.make_tokenizer(merge_across_spaces=True))."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fragility_tui.items.item import Item  # noqa: E402
from fragility_tui.harness.render import render  # noqa: E402
from runners.plan.item_requests import Encoder, plan_item  # noqa: E402
from runners.backends.transformers.plain_loop import reference_cell  # noqa: E402
from runners.backends.transformers.scoring import Scorer  # noqa: E402
from tiny_models import make_model, make_tokenizer  # noqa: E402

ITEMS = [
    Item("toy/1", "toy", None, "Which gas do plants absorb from the air?",
         ("oxygen", "nitrogen", "carbon dioxide", "helium"), 2),
    Item("toy/2", "toy", None, "What is the capital of France?",
         ("Paris", "Rome", "Berlin", "Madrid"), 0),
    # outer whitespace kept (lm-eval does not strip): cloze_bare's context ends in a space,
    # which moves onto the continuation; an option with a leading space keeps it
    Item("toy/3", "toy", None, " A man is sitting on a roof. He ",
         ("starts pulling up roofing.", " is ripping level tiles off.",
          "holds a rope.", "sings a song about water.\n"), 0),
]
CLOZE = ["cloze_qa", "cloze_bare"]


@pytest.fixture(scope="module")
def merging():
    torch.set_num_threads(1)
    tokenizer = make_tokenizer(merge_across_spaces=True)
    return tokenizer, make_model(tokenizer)


def lmeval_request(tokenizer, context: str, continuation: str) -> tuple[list[int], int]:
    """lm-eval 0.4.13's `_encode_pair`, then `context_enc + continuation_enc`, written
    out here from lm-eval's source independently of the runner."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole_enc = tokenizer(context + continuation)["input_ids"]
    context_enc = tokenizer(context)["input_ids"]
    continuation_enc = whole_enc[len(context_enc):]
    return context_enc + continuation_enc, len(context_enc)


def test_the_test_tokenizer_merges_across_the_boundary(merging):
    tokenizer, _ = merging
    prompt = render(ITEMS[0], "cloze_qa", 0)
    context_enc = tokenizer(prompt.context)["input_ids"]
    whole = tokenizer(prompt.context + prompt.continuations[2])["input_ids"]
    assert whole[:len(context_enc)] != context_enc  # ":" + " carbon" -> ":Ġ" ...


def test_requests_are_lmevals_context_enc_plus_continuation_enc(merging):
    tokenizer, _ = merging
    encoder = Encoder(tokenizer, is_instruct=True)
    differs = 0
    for item in ITEMS:
        for config in CLOZE:
            prompt = render(item, config, 0)
            for continuation in prompt.continuations:
                tokens, scored_from = encoder.cloze(prompt.context, continuation)
                assert (tokens, scored_from) == lmeval_request(tokenizer, prompt.context,
                                                               continuation)
                whole = tokenizer(prompt.context + continuation)["input_ids"]
                differs += tokens != whole
    assert differs >= 4  # the old "encode the whole string" rule would fail these


def test_cloze_text_is_not_stripped():
    item = ITEMS[2]
    bare, qa = render(item, "cloze_bare", 0), render(item, "cloze_qa", 0)
    assert bare.context == item.question and qa.context == f"Question: {item.question}\nAnswer:"
    assert bare.continuations == tuple(" " + c for c in item.choices)
    # generation prompts keep their normalisation
    assert render(item, "o0.letter", 0).text.startswith("Question: A man is sitting on a roof. He\n")


def test_scores_are_lmevals_and_options_share_the_context_tokens(merging):
    """The runner's log-likelihoods equal a full forward of lm-eval's token sequence (and
    the plain reference loop's), and the four options of a config share the context's
    tokens as one prefix in the prompt tree."""
    tokenizer, model = merging
    encoder = Encoder(tokenizer, is_instruct=True)
    gen, lik = [], []
    plans = [plan_item(encoder, item, CLOZE, 0, gen, lik) for item in ITEMS]
    assert not gen
    result = Scorer(model, tokenizer, {tokenizer.eos_token_id}).score([], lik)
    with torch.inference_mode():
        for request in lik:
            uid, config, option = request.key
            prompt = next(p for p in plans if p.item.item_uid == uid).prompts[config]
            tokens, scored_from = lmeval_request(tokenizer, prompt.context,
                                                 prompt.continuations[option])
            logprobs = torch.log_softmax(model(torch.tensor([tokens])).logits[0].float(), -1)
            expected = sum(float(logprobs[t - 1, tokens[t]])
                           for t in range(scored_from, len(tokens)))
            assert result.loglikelihoods[request.key][0] == pytest.approx(expected, abs=1e-4)
        for item in ITEMS:
            for config in CLOZE:
                plain = reference_cell(model, tokenizer, item, config, 0).scores
                ours = [result.loglikelihoods[(item.item_uid, config, k)][0] for k in range(4)]
                assert ours == pytest.approx(plain, abs=1e-4)
    for config in CLOZE:
        requests = [r for r in lik if r.key[:2] == ("toy/1", config)]
        stem = requests[0].tokens[:requests[0].scored_from]
        assert all(r.tokens[:r.scored_from] == stem for r in requests)
