"""+kN (SPEC v5 §2): N solved examples of the item's benchmark before the question, drawn
per item by the grid seed from the benchmark's other items in the run's pool, never the
item itself, the same for every config of the item, rendered in each config's format,
recorded per cell so the cell re-renders exactly (cells.examples), through parts too."""

from __future__ import annotations

import os

import pytest

from fragility_tui.harness.fewshot import draw_examples, pools_by_benchmark
from fragility_tui.harness.render import render
from fragility_tui.items.item import Item

POOL = [Item(f"b{k % 2}/{k}", f"b{k % 2}", None, f"Question {k}?",
             (f"w{k}", f"x{k}", f"y{k}", f"z{k}"), k % 4) for k in range(12)]


def test_examples_come_from_the_item_s_benchmark_never_the_item():
    pools = pools_by_benchmark(POOL)
    for item in POOL:
        for n in (1, 3, 5):
            drawn = draw_examples(item, pools, n, seed=0)
            assert len(drawn) == n and len({e.item_uid for e in drawn}) == n
            assert all(e.benchmark == item.benchmark and e.item_uid != item.item_uid
                       for e in drawn)
            # the first N of a larger draw: +k1 and +k5 agree on their common examples
            assert drawn == draw_examples(item, pools, 5, seed=0)[:n]
    # reproducible from the seed and the uids alone: the pool's order does not matter
    shuffled = pools_by_benchmark(reversed(POOL))
    assert draw_examples(POOL[0], shuffled, 3, 0) == draw_examples(POOL[0], pools, 3, 0)
    assert any(draw_examples(it, pools, 3, 0) != draw_examples(it, pools, 3, 1) for it in POOL)
    with pytest.raises(ValueError, match="benchmark 'b0' has 5 other item"):
        draw_examples(POOL[0], pools, 6, 0)


def test_examples_are_rendered_in_the_config_s_format_with_their_answers():
    item, a, b = POOL[0], POOL[2], POOL[4]
    prompt = render(item, "o1.paren+k2", 0, examples=(a, b))
    blocks = prompt.text.split("\n\n")
    assert blocks[0].endswith("Answer: (C)") and "(A) w2\n(B) x2" in blocks[0]  # native order
    assert blocks[1].endswith("Answer: (A)") and blocks[2].startswith("Question: Question 0?")
    assert prompt.examples == (a.item_uid, b.item_uid)
    roles = [m["role"] for m in prompt.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert prompt.messages[1]["content"] == "(C)"
    cloze = render(item, "cloze_qa+k1", 0, examples=(a,))
    assert cloze.context == "Question: Question 2?\nAnswer: y2\n\nQuestion: Question 0?\nAnswer:"
    lik = render(item, "o2.digit.lik+k1", 0, examples=(a,))
    assert lik.context.split("\n\n")[0].endswith("Answer: 3") and lik.continuations[0] == " 1"
    with pytest.raises(ValueError, match="shows 2 solved examples; 1 given"):
        render(item, "o0.letter+k2", 0, examples=(a,))


torch = pytest.importorskip("torch")


def test_fewshot_cells_equal_the_plain_loop_and_share_the_examples_prefix():
    from family_cases import SEED
    from tiny_models import make_model, make_tokenizer

    from runners.backends.transformers.plain_loop import reference_cell
    from runners.backends.transformers.scoring import Scorer
    from runners.plan.item_requests import Encoder, cells_for, plan_item
    from runners.plan.prefix_tree import build_tree, count_tokens

    torch.set_num_threads(1)
    tokenizer = make_tokenizer(adds_bos=True)
    model = make_model(tokenizer)
    pools = pools_by_benchmark(POOL)
    configs = ["o0.letter+k2", "o3.letter+k2", "cloze_qa+k2", "o1.paren.lik+k2",
               "o2.digit+nobos+k1"]
    encoder = Encoder(tokenizer, False, {})
    gen, lik = [], []
    plans = [plan_item(encoder, item, configs, SEED, gen, lik, pools) for item in POOL[:3]]
    result = Scorer(model, tokenizer, [tokenizer.eos_token_id]).score(gen, lik)
    by_uid = {it.item_uid: it for it in POOL}
    for plan in plans:
        for row in cells_for(plan, result, "tiny", None, 0.0):
            examples = tuple(by_uid[u] for u in row.examples)
            assert len(examples) == (1 if "+k1" in row.config_id else 2)
            assert plan.item.item_uid not in row.examples
            ref = reference_cell(model, tokenizer, plan.item, row.config_id, SEED, chat=False,
                                 examples=examples)
            if ref.scores is not None:
                assert row.scores == pytest.approx(ref.scores, abs=1e-4), row.config_id
            else:
                assert ref.output.startswith(row.raw_output), row.config_id
            assert row.pred == ref.pred or ref.margin < 1e-4, row.config_id
    # the six orders of one format share the examples (native order) before the question:
    # the prefix tree holds them once
    one = POOL[0]
    six = [t for c in (f"o{k}.letter+k2" for k in range(6))
           for t in _tokens(encoder, one, c, pools)]
    examples = len(six[0]) - len(_tokens(encoder, one, "o0.letter", pools)[0])
    common = len(os.path.commonprefix(six))
    assert common >= examples > 0
    assert count_tokens(build_tree(six)) <= sum(len(t) for t in six) - 5 * common


def _tokens(encoder, item, config_id, pools):
    from runners.plan.item_requests import plan_item

    gen, lik = [], []
    plan_item(encoder, item, [config_id], 0, gen, lik, pools)
    return [r.tokens for r in gen + lik]


def test_a_fewshot_run_records_its_examples_and_the_drill_down_re_renders_them(
        tiny_folder, tmp_path):
    from helpers import run_cli
    from test_run_loop import write_items

    from fragility_tui.store.store import Store
    from fragility_tui.tui.cell_explain import cell_detail

    items = write_items(tmp_path / "items.jsonl", 4)
    db = tmp_path / "s.duckdb"
    out = run_cli("--db", str(db), "run", "--model", str(tiny_folder), "--items", str(items),
                  "--grid", "g", "--configs", "o0.letter+k2,cloze_qa+k1,o1.paren.lik+k2",
                  "--threads", "1", "--per-benchmark", "0")
    assert out.returncode == 0, out.stderr
    store = Store(db)
    grid_items = {it.item_uid: it for it in store.load_items("g")}
    for uid, item in grid_items.items():
        cells = {c["config_id"]: c for c in store.item_cells("g", uid)}
        assert len(cells["o0.letter+k2"]["examples"]) == 2
        assert uid not in cells["o0.letter+k2"]["examples"]
        # every config of the item shows the same draw (+k1 is +k2's first)
        assert cells["cloze_qa+k1"]["examples"] == cells["o0.letter+k2"]["examples"][:1]
        text = cell_detail(item, "tiny-llama", "o0.letter+k2", cells["o0.letter+k2"], 0,
                           None, grid_items).plain
        first = grid_items[cells["o0.letter+k2"]["examples"][0]]
        assert "2 solved examples of the benchmark first (+k2)" in text
        assert first.question in text and "cannot re-render" not in text
        gone = cell_detail(item, "tiny-llama", "o0.letter+k2", cells["o0.letter+k2"], 0,
                           None, {uid: item}).plain
        assert "cannot re-render the prompt" in gone and "not among the grid's items" in gone
