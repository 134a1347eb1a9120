"""The openai backend's protocol code on answers recorded from a real server
(tests/runners/data/llama_cpp_0_3_36.json: llama-cpp-python 0.3.36 serving the SmolLM2 GGUF,
recorded by test_llama_server.py with FRAGILITY_RECORD_OUT), so CI checks the shapes a real
server sends without building one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.backends.openai.protocol import check_echo, continuation_loglikelihood, echoed

RECORDED = json.loads((Path(__file__).parent / "data" / "llama_cpp_0_3_36.json").read_text())


class Replay:
    """A client that answers each request with the recorded answer to the same request."""

    def __init__(self, exchanges: list):
        self.answers = {(e["path"], json.dumps(e["body"], sort_keys=True)): e["answer"]
                        for e in exchanges}

    def post(self, path: str, body: dict) -> dict:
        return self.answers[(path, json.dumps(body, sort_keys=True))]


def test_the_probe_refuses_llama_cpp_0_3_36_shifted_echo():
    reason, compared = check_echo(Replay(RECORDED["exchanges"]), "smollm2")
    assert reason and "disagree with its own generation" in reason
    first = compared[-1]
    # the measured case (docs/runner.md, served models): ":" after "Answer" is near-certain when generated
    assert first["token"] == ":" and first["generated"] > -0.1 and first["echoed"] < -5


def test_echo_answers_of_a_real_server_parse():
    text = "Question: What is the capital of France?\nAnswer: Paris"
    [answer] = [e["answer"] for e in RECORDED["exchanges"]
                if e["body"].get("echo") and e["body"]["prompt"] == text]
    tokens, values, offsets = echoed(answer, text)
    assert "".join(tokens) == text and offsets[0] == 0 and values[0] is None
    total, count = continuation_loglikelihood(answer, text, len(text) - len(" Paris"))
    assert count == 1 and tokens[-1] == " Paris" and total == pytest.approx(values[-1])
