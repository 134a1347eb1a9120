"""Issue 47 item 2: no piece of the API key (8 characters or more) leaves the openai client,
whatever the server sends back: an HTML proxy page quoting the Authorization header, an
error message quoting the key after 271 characters (past the old 300-character cut), a
generated text quoting it (stored as raw output otherwise)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")

from fake_openai import FakeOpenAI  # noqa: E402
from fragility_tui.store.store import Store  # noqa: E402
from runners.backends.openai.client import OpenAIClient, ServerError  # noqa: E402
from runners.run.loop import Run, RunSpec  # noqa: E402
from test_openai_backend import weights  # noqa: E402,F401
from test_run_loop import cells_of, write_items  # noqa: E402

KEY = "sk-proj-" + "4f9c2a7e1b3d5f60718293a4"  # 32 characters


def pieces_of_the_key(text: str) -> list[str]:
    return [KEY[i:i + 8] for i in range(len(KEY) - 7) if KEY[i:i + 8] in text]


def fail_message(server, **kw) -> str:
    client = OpenAIClient(server.url, api_key=KEY, backoff=0.0, retries=0, **kw)
    with pytest.raises(ServerError) as caught:
        client.post("completions", {"model": "m", "prompt": "The", "max_tokens": 1})
    return str(caught.value)


def test_a_proxy_page_quoting_the_header_leaks_nothing(weights):  # noqa: F811
    page = f"<html><body><pre>Authorization: Bearer {KEY}</pre> bad gateway</body></html>"
    with FakeOpenAI(*weights, key=KEY, html_says=page) as server:
        message = fail_message(server)
    assert "not JSON" in message and "[api key]" in message
    assert not pieces_of_the_key(message), message


def test_a_key_quoted_past_the_cut_leaks_no_piece(weights):  # noqa: F811
    """The 401 of the issue: the key after 271 characters, the excerpt cut at 300."""
    with FakeOpenAI(*weights, key=KEY, error_says="x" * 271 + f" key {KEY} rejected") as server:
        message = fail_message(server)
    assert "HTTP 400" in message
    assert not pieces_of_the_key(message), message


def test_a_generated_text_quoting_the_key_is_stored_redacted(weights, tmp_path):  # noqa: F811
    items = write_items(tmp_path / "items.jsonl", 1)
    store = Store(tmp_path / "s.duckdb")
    os.environ["REDACTION_TEST_KEY"] = KEY
    try:
        with FakeOpenAI(*weights, key=KEY, answer_text=f"my key is {KEY} so B") as server:
            spec = RunSpec(models=[], items=[str(items)], grid="g", per_benchmark=None,
                           threads=1, batch_size=2, backend="openai", configs=["o0.letter"],
                           server={"base_url": server.url, "served_model": server.model_id,
                                   "concurrency": 2, "endpoint": "completions",
                                   "api_key_env": "REDACTION_TEST_KEY"})
            assert Run(spec, store, display="none",
                       events_path=str(tmp_path / "ev.jsonl")).execute() == "finished"
    finally:
        os.environ.pop("REDACTION_TEST_KEY", None)
    raw = [value[3] for value in cells_of(store, "g").values()]
    assert raw and all("[api key]" in text for text in raw), raw
    assert not any(pieces_of_the_key(text) for text in raw), raw


def _scored_with(key: str, tmp_path, weights, answer: str):  # noqa: F811
    items = write_items(tmp_path / f"items-{len(key)}.jsonl", 2)
    store = Store(tmp_path / f"s-{len(key)}.duckdb")
    os.environ["REDACTION_TEST_KEY"] = key
    try:
        with FakeOpenAI(*weights, key=key, model_id="tiny-served-a", answer_text=answer) \
                as server:
            spec = RunSpec(models=[], items=[str(items)], grid="g", per_benchmark=None,
                           threads=1, batch_size=2, backend="openai",
                           configs=["o0.letter", "o1.letter"],
                           server={"base_url": server.url, "served_model": server.model_id,
                                   "concurrency": 2, "endpoint": "completions",
                                   "api_key_env": "REDACTION_TEST_KEY"})
            assert Run(spec, store, display="none",
                       events_path=str(tmp_path / f"ev-{len(key)}.jsonl")).execute() \
                == "finished"
    finally:
        os.environ.pop("REDACTION_TEST_KEY", None)
    return {k: (v[0], v[1]) for k, v in cells_of(store, "g").items()}, \
        [v[3] for v in cells_of(store, "g").values()]


@pytest.mark.parametrize("short", ["B", "a"])
def test_a_short_key_changes_no_score(weights, tmp_path, short):  # noqa: F811
    """Issue 57 item 2: with key "B" every answer once became "The answer is [api key].";
    with key "a" /v1/models listed nothing. The answer parsed and the model list read are
    the server's own; only what is stored is redacted, a short key as a whole token."""
    answer = "The answer is B."
    long_cells, _ = _scored_with(KEY, tmp_path, weights, answer)
    short_cells, raw = _scored_with(short, tmp_path, weights, answer)
    assert short_cells == long_cells and any(correct for correct, _ in short_cells.values())
    expected = "The answer is [api key]." if short == "B" else answer  # "a" is in no token
    assert set(raw) == {expected}


def test_a_huge_answer_is_parsed_whole_and_stored_capped(weights, tmp_path):  # noqa: F811
    """Issue 57 item 1: a 1 MiB answer to a 16-token generation kept whole in every cell.
    (An answer whose parse is decided early is cut there already; this one never is.)"""
    from runners.backends.openai.backend import RAW_OUTPUT_CAP

    cells, raw = _scored_with(KEY, tmp_path, weights, "x" * (1 << 20))
    assert all(pred == -1 for _, pred in cells.values())  # unparsed: counted wrong
    assert all(len(text) < RAW_OUTPUT_CAP + 80 and "1,048,576 characters in all" in text
               for text in raw), [len(t) for t in raw]
