"""A small client for an OpenAI-compatible server (`run --backend openai`): stdlib only.

- JSON over HTTP(S) with `urllib`; a bounded number of requests in flight (`map` runs them
  on a thread pool of `concurrency` workers);
- retries with exponential backoff (honouring `Retry-After`) on 429, 5xx, timeouts and
  refused or reset connections; any other 4xx fails at once (a retry cannot fix it);
- the API key: read only from the environment variable the user names, sent only in the
  Authorization header, and never part of any message, repr, answer or record this module
  makes: every error text and every string of every answer is passed through
  `fragility_tui.text.redact_secret` (any piece of the key of 8 characters or more) before
  anything is cut or quoted.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from fragility_tui.errors import InputError
from fragility_tui.text import redact_secret

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_RETRIES = 5
BACKOFF_S = 0.5  # first retry delay; doubled per attempt, capped at MAX_BACKOFF_S
MAX_BACKOFF_S = 30.0
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class ServerError(RuntimeError):
    """A request that failed for good (after the retries a transient failure gets)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def endpoint_root(base_url: str) -> tuple[str, str]:
    """(the root requests go to, ending in /v1; the host:port provenance names). A URL
    carrying credentials is refused: the key travels in a variable, never in a URL."""
    parsed = urllib.parse.urlsplit((base_url or "").strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InputError(f"--base-url must be an http(s) URL such as http://127.0.0.1:8000/v1, "
                         f"got {base_url!r}", field="--base-url")
    if parsed.username or parsed.password:
        raise InputError("--base-url must not carry credentials: put the key in an "
                         "environment variable and name it with --api-key-env",
                         field="--base-url")
    path = parsed.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    host = parsed.hostname + (f":{parsed.port}" if parsed.port else "")
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", "")), host


def read_api_key(variable: str | None) -> str | None:
    """The key from the variable `--api-key-env` names (None: no key is sent)."""
    if not variable:
        return None
    value = os.environ.get(variable)
    if not value:
        # The name is shown only when it looks like one: a key typed in its place is not.
        shown = variable if re.fullmatch(r"[A-Z_][A-Z0-9_]{0,63}", variable) else "the variable"
        raise InputError(f"--api-key-env names {shown}, which is not set (or empty) in this "
                         "environment", field="--api-key-env")
    return value.strip()


class OpenAIClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, concurrency: int = 4,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int = DEFAULT_RETRIES,
                 backoff: float = BACKOFF_S):
        self.root, self.host = endpoint_root(base_url)
        self.__key = api_key  # name-mangled: not in vars() dumps by accident
        self.concurrency = max(1, int(concurrency))
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.retried = 0  # transient failures retried (recorded in provenance)

    def __repr__(self) -> str:
        return f"OpenAIClient({self.root!r}, key={'set' if self.__key else 'none'})"

    def redact(self, text: str) -> str:
        return redact_secret(text, self.__key)

    def clean(self, value):
        """Every string of an answer, redacted (a server may quote the key back in its
        generated text, which would otherwise be stored as raw output)."""
        if not self.__key:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self.clean(k): self.clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.clean(v) for v in value]
        return value

    def get(self, path: str) -> dict:
        return self._request("GET", path, None)

    def post(self, path: str, body: dict) -> dict:
        return self._request("POST", path, body)

    def map(self, function, arguments: list) -> list:
        """function(argument) for each, at most `concurrency` at once, results in order."""
        if len(arguments) <= 1 or self.concurrency == 1:
            return [function(a) for a in arguments]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(arguments)),
                                thread_name_prefix="openai") as pool:
            return list(pool.map(function, arguments))

    def _request(self, method: str, path: str, body: dict | None) -> dict:
        url = f"{self.root}/{path.lstrip('/')}"
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            wait = None
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return self.clean(_json(response.read(), f"{method} /{path}",
                                            self.redact))
            except urllib.error.HTTPError as exc:
                detail = _excerpt(exc, self.redact)
                if exc.code not in RETRY_STATUS or attempt == self.retries:
                    raise ServerError(f"{method} {self.host}/v1/{path} answered HTTP "
                                      f"{exc.code}: {detail}", exc.code) from None
                wait = _retry_after(exc.headers.get("Retry-After"))
                failure = f"HTTP {exc.code}"
            except (TimeoutError, socket.timeout, ConnectionError, urllib.error.URLError) as exc:
                reason = getattr(exc, "reason", exc)
                failure = self.redact(f"{type(reason).__name__}: {reason}")
                if attempt == self.retries:
                    raise ServerError(f"{method} {self.host}/v1/{path} failed after "
                                      f"{self.retries + 1} attempts: {failure}") from None
            self.retried += 1
            time.sleep(wait if wait is not None else
                       min(MAX_BACKOFF_S, self.backoff * (2 ** attempt)))
        raise AssertionError("unreachable")  # the loop returns or raises


def _json(raw: bytes, what: str, redact) -> dict:
    try:
        value = json.loads(raw)
    except ValueError:
        text = redact(raw.decode("utf-8", "replace"))  # the whole text, before the cut
        raise ServerError(f"{what} answered something that is not JSON: {text[:120]!r}") \
            from None
    if not isinstance(value, dict):
        raise ServerError(f"{what} answered JSON that is not an object")
    return value


def _excerpt(exc: urllib.error.HTTPError, redact) -> str:
    try:
        text = exc.read().decode("utf-8", "replace")
    except Exception:  # the body is gone (a reset connection): the status says enough
        text = str(exc.reason or "")
    text = redact(text)  # before the message is picked out and cut
    try:
        error = json.loads(text).get("error")
        text = error.get("message", text) if isinstance(error, dict) else str(error or text)
    except (ValueError, AttributeError):
        pass
    return " ".join(redact(str(text)).split())[:300]


def _retry_after(value: str | None) -> float | None:
    try:
        return min(MAX_BACKOFF_S, max(0.0, float(value))) if value else None
    except ValueError:  # an HTTP date: back off by the usual schedule
        return None
