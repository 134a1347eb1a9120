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
