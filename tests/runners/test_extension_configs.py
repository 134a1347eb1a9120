"""The extension configs of SPEC v5 §2 in our runner: letter likelihood (`.lik`) and the
+bos/+nobos, +raw/+chat modifiers. The batched scorer's cells equal the plain loop's
(runners/backends/transformers/plain_loop.py, which tokenises on its own) for a tokenizer
that adds a BOS token (Llama's, Gemma's) and one that adds none (Qwen's); a forced BOS
changes the tokens by exactly that token; the paper set's cells do not move when the
extensions run beside them; and the letter-likelihood configs cost a few tokens a config
where the prompt is the generation config's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from family_cases import ITEMS, SEED  # noqa: E402
from tiny_models import make_model, make_tokenizer  # noqa: E402

from fragility_tui.harness.config_axes import LIK_IDS, PAPER_IDS  # noqa: E402

MODIFIED = ["o0.letter+bos", "o0.letter+nobos", "cloze_qa+bos", "cloze_qa+nobos",
            "o1.paren.lik+bos", "o1.paren.lik+nobos", "o2.digit+raw", "o2.digit+chat",
            "o3.letter+nobos+raw", "o4.instruct+bos+chat", "o5.digit.lik+chat",
            "o0.paren.lik+nobos+chat"]


@pytest.fixture(scope="module", params=[True, False], ids=["adds-bos", "no-bos"])
def tiny(request):
    tokenizer = make_tokenizer(adds_bos=request.param)
    return tokenizer, make_model(tokenizer)


def _cells(tokenizer, model, configs, *, instruct=False):
    from runners.backends.transformers.scoring import Scorer
    from runners.plan.item_requests import Encoder, cells_for, plan_item
    from runners.plan.numerics import tolerance

    torch.set_num_threads(1)
    scorer = Scorer(model, tokenizer, [tokenizer.eos_token_id])
    encoder = Encoder(tokenizer, instruct, {})
    gen, lik = [], []
    plans = [plan_item(encoder, item, list(configs), SEED, gen, lik) for item in ITEMS]
    result = scorer.score(gen, lik)
    return {(r.item_uid, r.config_id): r for plan in plans
            for r in cells_for(plan, result, "tiny", None, 0.0, tolerance("fp32"))}


@pytest.mark.parametrize("instruct", [False, True], ids=["raw-mode", "chat-mode"])
def test_extension_cells_equal_the_plain_loop(tiny, instruct):
    from runners.backends.transformers.plain_loop import reference_cell

    tokenizer, model = tiny
    cells = _cells(tokenizer, model, list(LIK_IDS) + MODIFIED, instruct=instruct)
    by_uid = {it.item_uid: it for it in ITEMS}
    assert len(cells) == len(ITEMS) * (len(LIK_IDS) + len(MODIFIED))
    for (uid, config_id), row in cells.items():
        ref = reference_cell(model, tokenizer, by_uid[uid], config_id, SEED, chat=instruct)
        where = (uid, config_id)
        if ref.scores is not None:
            assert row.scores == pytest.approx(ref.scores, abs=1e-4), where
            assert row.margin == pytest.approx(ref.margin, abs=1e-4), where
        else:
            assert ref.output.startswith(row.raw_output), where
        assert row.pred == ref.pred or ref.margin < 1e-4, where
        assert row.correct == (row.pred == by_uid[uid].gold), where


def test_a_letter_likelihood_cell_reads_its_labels(tiny):
    """Scores in native order (like a cloze cell's), the prediction the first maximum of
    the labels as shown, no length normalisation; the permutation is the generation
    config's of the same order."""
    tokenizer, model = tiny
    cells = _cells(tokenizer, model, ["o3.paren", "o3.paren.lik"])
    for item in ITEMS:
        gen, lik = cells[(item.item_uid, "o3.paren")], cells[(item.item_uid, "o3.paren.lik")]
        assert lik.permutation == gen.permutation and lik.raw_output is None
        shown = [lik.scores[int(k)] for k in lik.permutation]
        assert lik.pred == int(lik.permutation[shown.index(max(shown))])


def _requests(tokenizer, config_id, *, instruct=False):
    from runners.plan.item_requests import Encoder, plan_item

    gen, lik = [], []
    plan_item(Encoder(tokenizer, instruct, {}), ITEMS[0], [config_id], SEED, gen, lik)
    return [r.tokens for r in gen] + [r.tokens for r in lik]


@pytest.mark.parametrize("base", ["o0.letter", "cloze_qa", "o2.digit.lik"])
@pytest.mark.parametrize("instruct", [False, True], ids=["raw-mode", "chat-mode"])
def test_a_forced_bos_changes_the_tokens_by_exactly_the_bos(base, instruct):
    for adds in (True, False):
        tokenizer = make_tokenizer(adds_bos=adds)
        bos = tokenizer.bos_token_id
        default = _requests(tokenizer, base, instruct=instruct)
        on = _requests(tokenizer, f"{base}+bos", instruct=instruct)
        off = _requests(tokenizer, f"{base}+nobos", instruct=instruct)
        # a chat-mode generation prompt is encoded without special tokens (the template
        # carries what it wants); cloze and .lik prompts are raw text, never templated
        templated = instruct and base == "o0.letter"
        for d, b, n in zip(default, on, off):
            assert b == [bos] + n and n[0] != bos
            assert d == (b if adds and not templated else n)
    tokenizer = make_tokenizer(adds_bos=True)  # the common case named exactly
    assert _requests(tokenizer, "o0.letter") == [
        [tokenizer.bos_token_id] + t for t in _requests(tokenizer, "o0.letter+nobos")]


def test_raw_and_chat_force_the_template_either_way(tiny):
    tokenizer, _ = tiny
    raw_mode = _requests(tokenizer, "o2.digit")
    chat_mode = _requests(tokenizer, "o2.digit", instruct=True)
    assert raw_mode != chat_mode
    assert _requests(tokenizer, "o2.digit+chat") == chat_mode
    assert _requests(tokenizer, "o2.digit+raw", instruct=True) == raw_mode


def test_the_paper_cells_do_not_move_beside_the_extensions(tiny):
    tokenizer, model = tiny
    alone = _cells(tokenizer, model, PAPER_IDS)
    beside = _cells(tokenizer, model, list(PAPER_IDS) + list(LIK_IDS) + MODIFIED)
    for key, row in alone.items():
        other = beside[key]
        assert (row.pred, row.correct, row.permutation, row.raw_output, row.prompt_sha) == \
            (other.pred, other.correct, other.permutation, other.raw_output,
             other.prompt_sha), key
        if row.scores is not None:
            assert other.scores == pytest.approx(row.scores, abs=1e-5), key


def test_letter_likelihood_adds_only_the_labels_to_a_raw_prompt_tree():
    """In raw mode the .lik context is the generation prompt itself: the 18 configs add
    their label tokens to the item's prefix tree and nothing else."""
    from runners.plan.prefix_tree import build_tree, count_tokens

    tokenizer = make_tokenizer(chat=False)
    paper = [t for c in PAPER_IDS for t in _requests(tokenizer, c)]
    lik = [t for c in LIK_IDS for t in _requests(tokenizer, c)]
    added = count_tokens(build_tree(paper + lik)) - count_tokens(build_tree(paper))
    assert 0 < added <= 18 * 4 * 3  # at most three tokens a label
    for config_id in LIK_IDS:  # each label request extends the generation prompt
        prompt, = _requests(tokenizer, config_id.removesuffix(".lik"))
        assert all(t[:len(prompt)] == prompt for t in _requests(tokenizer, config_id))


def test_a_run_of_extension_configs_writes_them_and_refuses_what_cannot_run(tiny_folder,
                                                                            tmp_path):
    """`run --configs lik,o0.letter+nobos,...` through the CLI: every cell written with its
    axes read from its id; +k5 with two items of a benchmark is refused before anything
    is written."""
    from helpers import run_cli
    from test_run_loop import write_items

    from fragility_tui.store.store import Store

    items = write_items(tmp_path / "items.jsonl", 2)
    db = tmp_path / "s.duckdb"
    configs = "o0.letter.lik,o5.digit.lik,o0.letter+nobos,cloze_qa+bos,o1.paren+raw"
    out = run_cli("--db", str(db), "run", "--model", str(tiny_folder), "--items", str(items),
                  "--grid", "g", "--configs", configs, "--threads", "1",
                  "--per-benchmark", "0")
    assert out.returncode == 0, out.stderr
    cube = Store(db).load_cube("g")
    assert sorted(cube.configs) == sorted(configs.split(","))
    assert cube.axes("o5.digit.lik")["scoring"] == "letter_lik"
    assert cube.axes("o0.letter+nobos")["bos"] == "off"
    assert cube.axes("o1.paren+raw")["template"] == "raw"
    refused = run_cli("--db", str(db), "run", "--model", str(tiny_folder), "--items",
                      str(items), "--grid", "g", "--configs", "lik+k5")
    assert refused.returncode == 2 and "toy (2 items) cannot give them" in refused.stderr
    assert len(Store(db).runs()) == 1  # the refused run left no row


def test_a_model_refuses_the_modifiers_it_cannot_honour():
    """+chat without a chat template, +bos without a BOS token: refused, named, the other
    configs run (the run's `configs_refused` event prints `refusal`)."""
    from types import SimpleNamespace

    from runners.models.prepare import PreparedModel

    tokenizer = make_tokenizer(chat=False)
    tokenizer.bos_token = None
    model = SimpleNamespace(name="base", tokenizer=tokenizer, refused={})
    PreparedModel.refuse_modifiers(model, ["o0.letter", "o0.letter+chat", "cloze_qa+bos",
                                           "cloze_qa+nobos", "o1.digit+raw"])
    assert set(model.refused) == {"o0.letter+chat", "cloze_qa+bos"}
    line = PreparedModel.refusal.fget(model)
    assert "+chat needs a chat template" in line and "+bos needs a BOS token" in line


def test_letter_likelihood_with_chat_adds_only_the_labels_to_the_chat_prompt():
    """.lik+chat: the labels (no leading space, lm-eval's --apply_chat_template way) after
    the chat template's assistant turn, so a chat model's .lik+chat requests extend the
    prompt its generation config already forwards."""
    tokenizer = make_tokenizer()
    for order in ("o0", "o4"):
        prompt, = _requests(tokenizer, f"{order}.letter", instruct=True)
        labels = _requests(tokenizer, f"{order}.letter.lik+chat", instruct=True)
        assert len(labels) == 4 and all(t[:len(prompt)] == prompt for t in labels)
    from fragility_tui.harness.render import render

    assert render(ITEMS[0], "o1.paren.lik+chat", SEED).continuations == ("(A)", "(B)",
                                                                          "(C)", "(D)")


@pytest.mark.parametrize("model_type, adds_bos", [("llama", True), ("gemma3_text", True),
                                                  ("qwen3", False)])
def test_families_score_the_extension_configs_like_the_plain_loop(tmp_path, model_type,
                                                                   adds_bos):
    """Issue 56 (6): a family whose tokenizer adds a BOS token by default (Llama, Gemma)
    and one whose does not (Qwen), loaded as `run --model FOLDER` loads them: letter
    likelihood and the BOS and template modifiers equal the plain loop's cells."""
    from family_cases import compare_with_plain_loop, tiny_folder

    from runners.models.prepare import load_spec

    torch.set_num_threads(1)
    folder = tiny_folder(tmp_path, model_type, make_tokenizer(adds_bos=adds_bos))
    loaded = load_spec(str(folder), dtype="fp32", device="cpu")
    assert loaded.fingerprint["add_bos"] is adds_bos
    configs = ["o0.letter.lik", "o4.digit.lik+chat", "o0.letter+nobos", "o0.letter+bos",
               "cloze_qa+nobos", "o2.paren+raw"]
    summary = compare_with_plain_loop(loaded, configs=configs)
    assert summary["cells"] == 2 * len(configs) and not summary["outside"], summary["outside"]
    for row, reference in summary["pairs"]:
        if reference.scores is not None:
            assert row.scores == pytest.approx(reference.scores, abs=1e-4), row.config_id
        assert row.pred == reference.pred or reference.margin < 1e-4, row.config_id
