"""A fake OpenAI-compatible server for tests: http.server on 127.0.0.1 (an ephemeral port),
answering /v1/models, /v1/completions and /v1/chat/completions in the shapes vLLM and
llama-cpp-python answer them, computed by the tiny transformers model. It stops itself
after `lifetime_s` (a test that forgets it leaves no server behind).

Behaviours a test switches on:
- `echo="shifted"`: echoed prompt log-probabilities one position off, as llama-cpp-python
  0.3.36 reports them (docs/runner.md, served models): token i gets log p(token i | tokens[:i+1]), the row
  of its own position rather than the one before;
- `echo="none"`: an echo request is refused (HTTP 400), as chat-first hosted APIs do;
- `completions=False`: no /v1/completions at all (404; a chat-only server);
- `fail_first=N` with `fail_status`: the first N POSTs answer that status (429 with
  Retry-After: 0, or a 5xx); `fail_every=K`: so does every K-th POST; `fail_at={N, ...}`:
  so do the POSTs of those numbers (a run's request answered 503 once, mid-run);
  `retry_after`: the Retry-After header of those answers (default: "0" for a 429, none
  otherwise), `fail_says` their message (default "busy"); `stall_first=N`: the first N
  POSTs sleep `stall_s` first (a client timeout);
- `key`: every request must carry `Authorization: Bearer KEY` (else 401);
- `stall_after=N`: every POST after the N-th sleeps `stall_s` first (a server that hangs
  mid-run); `trickle_s`: each answer's bytes are sent one at a time, `trickle_s` apart (a
  server that never times out a socket read);
- `fail_after=N`: every POST after the N-th answers `fail_status` (a server that goes
  down after the run's first request);
- `answer_text`: the generated text of every generation (a model quoting the key, a 64 KB
  answer); `html_says`: every POST answers 200 with this HTML page (a proxy's error page).
Every request is recorded (`requests`: path, headers, body) and the most requests in
flight at once is `max_in_flight`.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

SYSTEM_FINGERPRINT = "fp_fake_tiny"


class FakeOpenAI:
    def __init__(self, model, tokenizer, *, model_id: str = "tiny-served", echo: str = "ok",
                 completions: bool = True, fail_first: int = 0, fail_status: int = 429,
                 fail_every: int = 0, stall_first: int = 0, stall_s: float = 2.0,
                 key: str | None = None,
                 lifetime_s: float = 600.0, error_says: str | None = None,
                 stall_after: int | None = None, trickle_s: float = 0.0,
                 answer_text: str | None = None, html_says: str | None = None,
                 fail_after: int | None = None, fail_at=(), retry_after: str | None = None,
                 fail_says: str = "busy"):
        self.model, self.tokenizer, self.model_id = model, tokenizer, model_id
        self.echo, self.completions, self.key = echo, completions, key
        self.fail_first, self.fail_status, self.fail_every = fail_first, fail_status, fail_every
        self.failed = 0  # answers that were fail_status
        self.stall_first, self.stall_s = stall_first, stall_s
        self.error_says = error_says  # a 400 body text for every POST (an error path test)
        self.stall_after, self.trickle_s = stall_after, trickle_s
        self.answer_text, self.html_says = answer_text, html_says
        self.fail_after = fail_after  # every POST after the N-th answers fail_status
        self.fail_at, self.retry_after = frozenset(fail_at), retry_after
        self.fail_says = fail_says
        self.requests: list = []
        # A completion's answer by its request: the model is deterministic, so a request sent
        # again (a resumed or repeated run) is answered as before without the forward.
        self._answers: dict = {}
        self.in_flight = self.max_in_flight = self.posts = 0
        self._lock = threading.Lock()
        self._compute = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    def __enter__(self):
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the model's answers --------------------------------------------------------------

    @torch.no_grad()
    def logprob_rows(self, ids: list[int]) -> torch.Tensor:
        with self._compute:
            logits = self.model(input_ids=torch.tensor([ids])).logits[0].float()
        return torch.log_softmax(logits, dim=-1)

    def generate(self, ids: list[int], max_tokens: int) -> tuple[list, list, str]:
        eos = self.tokenizer.eos_token_id
        out, values = [], []
        while len(out) < max_tokens:
            row = self.logprob_rows(ids + out)[-1]
            token = int(row.argmax())
            out.append(token)
            values.append(float(row[token]))
            if token == eos:
                return out, values, "stop"
        return out, values, "length"

    def pieces(self, ids: list[int]) -> tuple[list, list]:
        """(each token's text, its offset), decoded incrementally."""
        texts, offsets, before = [], [], ""
        for i in range(len(ids)):
            now = self.tokenizer.decode(ids[:i + 1])
            texts.append(now[len(before):])
            offsets.append(len(before))
            before = now
        return texts, offsets

    def completion(self, body: dict, prompt_text: str) -> dict:
        key = (json.dumps(body, sort_keys=True), prompt_text)
        if key not in self._answers:
            self._answers[key] = self._complete(body, prompt_text)
        return copy.deepcopy(self._answers[key])

    def _complete(self, body: dict, prompt_text: str) -> dict:
        ids = self.tokenizer(prompt_text)["input_ids"]
        max_tokens = int(body.get("max_tokens") or 16)
        generated, gen_values, finish = self.generate(ids, max_tokens)
        text = self.tokenizer.decode(generated, skip_special_tokens=True)
        if self.answer_text is not None and not body.get("echo"):
            text = self.answer_text
        choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs") is not None:
            tokens, values = list(generated), list(gen_values)
            if body.get("echo"):
                rows = self.logprob_rows(ids)
                if self.echo == "shifted":  # the row of the token's own position
                    prompt_values = [float(rows[i, t]) for i, t in enumerate(ids)]
                else:
                    prompt_values = [None] + [float(rows[i - 1, t])
                                              for i, t in enumerate(ids) if i > 0]
                tokens, values = ids + tokens, prompt_values + values
                text = prompt_text + text
                choice["text"] = text
            texts, offsets = self.pieces(tokens)
            choice["logprobs"] = {"tokens": texts, "token_logprobs": values,
                                  "text_offset": offsets,
                                  "top_logprobs": [None if v is None else {t: v}
                                                   for t, v in zip(texts, values)]}
        return {"id": "cmpl-fake", "object": "text_completion", "model": self.model_id,
                "system_fingerprint": SYSTEM_FINGERPRINT, "choices": [choice],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(generated),
                          "total_tokens": len(ids) + len(generated)}}

    def chat(self, body: dict) -> dict:
        text = self.tokenizer.apply_chat_template(body["messages"], tokenize=False,
                                                  add_generation_prompt=True)
        answer = self.completion(dict(body, logprobs=None, echo=False), text)
        choice = answer["choices"][0]
        answer["object"] = "chat.completion"
        answer["choices"] = [{"index": 0, "finish_reason": choice["finish_reason"],
                              "message": {"role": "assistant", "content": choice["text"]}}]
        return answer


def _handler(server: FakeOpenAI):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, payload, headers: dict | None = None) -> None:
            html = isinstance(payload, str)
            data = payload.encode() if html else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if html else "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if server.trickle_s and self.command == "POST":
                    for k in range(len(data)):
                        self.wfile.write(data[k:k + 1])
                        self.wfile.flush()
                        time.sleep(server.trickle_s)
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out
                pass

        def _authorised(self) -> bool:
            if server.key and self.headers.get("Authorization") != f"Bearer {server.key}":
                self._send(401, {"error": {"message": "invalid api key"}})
                return False
            return True

        def do_GET(self):
            server.requests.append((self.path, dict(self.headers), None))
            if not self._authorised():
                return
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [
                    {"id": server.model_id, "object": "model", "owned_by": "fake"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            server.requests.append((self.path, dict(self.headers), body))
            with server._lock:
                server.posts += 1
                n = server.posts
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            try:
                answer = self._answer(n, body)
            finally:  # out of flight before the client can read the answer and send again
                with server._lock:
                    server.in_flight -= 1
            if answer:
                self._send(*answer)

        def _answer(self, n: int, body: dict):
            if server.key and self.headers.get("Authorization") != f"Bearer {server.key}":
                return 401, {"error": {"message": "invalid api key"}}
            if server.error_says:
                return 400, {"error": {"message": server.error_says}}
            if server.html_says:
                return 200, server.html_says
            if n <= server.stall_first or server.stall_after is not None and \
                    n > server.stall_after:
                time.sleep(server.stall_s)
            if n <= server.fail_first or server.fail_every and n % server.fail_every == 0 \
                    or server.fail_after is not None and n > server.fail_after \
                    or n in server.fail_at:
                server.failed += 1
                retry_after = server.retry_after or ("0" if server.fail_status == 429 else None)
                return (server.fail_status, {"error": {"message": server.fail_says}},
                        {"Retry-After": retry_after} if retry_after else None)
            path = self.path.rstrip("/")
            if path == "/v1/chat/completions":
                return 200, server.chat(body)
            if path == "/v1/completions" and server.completions:
                if body.get("echo") and server.echo == "none":
                    return 400, {"error": {"message": "echo is not supported"}}
                return 200, server.completion(body, body["prompt"])
            return 404, {"error": {"message": f"no route {self.path}"}}

    return Handler
