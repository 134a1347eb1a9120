"""A small client for an OpenAI-compatible server (`run --backend openai`): stdlib only.

- JSON over HTTP(S) with `urllib`; a bounded number of requests in flight (`map` runs them
  on a thread pool of `concurrency` workers);
- retries with exponential backoff (honouring `Retry-After`) on 429, 5xx and refused or
  reset connections, and once on a time-out (a server slower than the deadline twice is
  slow, not unlucky); any other 4xx fails at once (a retry cannot fix it);
- bounds: a whole-request deadline (`timeout`, `--request-timeout`: connecting, sending and
  every byte of the answer; a socket timeout alone is per read, and a server trickling a
  byte every few seconds never trips it) and a cap on an answer's size. A watchdog thread
  shuts the socket of a request past its deadline;
- telling: `on_retry` (None: nothing is told), a callable the run sets, is given a
  RetryNotice before each retry's wait (what was asked, why it failed, the attempt about
  to be made and the most this request gets, the wait) and once a retried request is
  answered, so the run's progress line can say that a request is being retried and why.
  It is called on the worker's thread; what it raises is ignored (a progress line never
  fails a request). Its reason is server text: redacted like every error text;
- stopping: `cancel()` (or `should_stop` turning true while `map` waits) shuts every
  socket in flight and ends the workers' retries, so the process exits within seconds of
  a SIGTERM or `runs cancel` (`RequestsCancelled`, which the run loop records as cancelled);
- the API key: read only from the environment variable the user names, sent only in the
  Authorization header, and never part of any message, repr or record this module makes:
  every error text is passed through `fragility_tui.text.redact_secret` (any piece of a key
  of 8 characters or more; a shorter key only where it stands as a whole token) before
  anything is cut or quoted. Answers are returned as the server gave them: what the runner
  parses and scores, and the model list it reads, are never redacted (a one-letter key
  once turned every "B" into "[api key]"); the backend stores a generated text redacted
  (`GenResult.stored_text`).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass

from fragility_tui.errors import InputError
from fragility_tui.text import redact_secret

DEFAULT_TIMEOUT_S = 120.0  # the whole request, answer included (--request-timeout)
DEFAULT_RETRIES = 5
MAX_TIMEOUT_RETRIES = 1  # a time-out is retried once; resets and 5xx keep their retries
BACKOFF_S = 0.5  # first retry delay; doubled per attempt, capped at MAX_BACKOFF_S
MAX_BACKOFF_S = 30.0
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_ANSWER_BYTES = 16 << 20  # an answer larger than this is refused, not read on
MAX_ERROR_BYTES = 64 << 10  # of an error answer's body, read for its message
MAX_REASON_CHARS = 160  # of the server's message, in a retry's reason
WATCH_S = 0.2  # how often the watchdog looks at the deadlines
POLL_S = 1.0  # how often `map` asks should_stop while it waits


class ServerError(RuntimeError):
    """A request that failed for good (after the retries a transient failure gets)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class RequestsCancelled(KeyboardInterrupt):
    """The run was stopped (SIGTERM, ctrl+c, `runs cancel`) while requests were in flight;
    a KeyboardInterrupt so the run loop records the run as cancelled (resumable)."""


@dataclass(frozen=True)
class RetryNotice:
    """What `OpenAIClient.on_retry` is told: a request waits `delay_s` to be tried again
    (`recovered` False), or a retried request was answered (`recovered` True; `attempt` is
    the one that succeeded, `delay_s` 0 and `reason` empty)."""

    request: str  # what the caller named it (`label`), else "POST host/v1/path"
    attempt: int  # the attempt about to be made: 2 for the first retry
    attempts: int  # the most this request gets (a time-out is retried once)
    delay_s: float  # the wait before it (a Retry-After, else the back-off)
    reason: str  # why, redacted: "server said HTTP 503: busy", "timed out: ..."
    recovered: bool = False

    @property
    def event(self) -> str:
        """The run's event kind (fragility_tui/schemas/events.py)."""
        return "request_recovered" if self.recovered else "request_retry"

    def fields(self) -> dict:
        """The event's fields."""
        if self.recovered:
            return {"request": self.request, "attempt": self.attempt}
        return {k: v for k, v in asdict(self).items() if k != "recovered"}


class _Expired(Exception):
    """A request's deadline passed (the watchdog shut its socket)."""


class _Failed(Exception):
    """An HTTP error answer, its message read within the request's deadline."""

    def __init__(self, code: int, detail: str, retry_after: str | None):
        super().__init__(code)
        self.code, self.detail, self.retry_after = code, detail, retry_after


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed: urllib would send the Authorization header on to
    wherever it points. The 3xx fails the run with the server's message."""

    def redirect_request(self, *args, **kwargs):
        return None


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


class _Watch:
    """The sockets of the requests in flight, each with its deadline; a daemon thread shuts
    a socket whose deadline passed, or every socket once the client is cancelled."""

    def __init__(self):
        self.lock = threading.Lock()
        self.open: dict[int, tuple[object, float]] = {}  # thread id -> (connection, deadline)
        self.expired: set[int] = set()
        self.cancelled = threading.Event()
        self.thread: threading.Thread | None = None

    def add(self, connection, deadline: float) -> None:
        with self.lock:
            self.open[threading.get_ident()] = (connection, deadline)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True,
                                               name="openai-watchdog")
                self.thread.start()

    def remove(self) -> bool:
        """Forget this thread's request; True when the watchdog shut it for its deadline."""
        ident = threading.get_ident()
        with self.lock:
            self.open.pop(ident, None)
            if ident in self.expired:
                self.expired.discard(ident)
                return True
        return False

    def shut_all(self) -> None:
        with self.lock:
            for connection, _ in self.open.values():
                _shut(connection)

    def _run(self) -> None:
        while True:
            self.cancelled.wait(WATCH_S)
            now = time.monotonic()
            with self.lock:
                for ident, (connection, deadline) in self.open.items():
                    if self.cancelled.is_set() or now > deadline:
                        if now > deadline:
                            self.expired.add(ident)
                        _shut(connection)
            if self.cancelled.is_set():
                time.sleep(WATCH_S)  # requests may still be opening sockets: shut them too


def _shut(connection) -> None:
    # urllib drops the connection's `sock` once the headers are in (the answer's reader
    # keeps the socket open): the socket recorded at connect is the one to shut.
    sock = getattr(connection, "watched_sock", None) or getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked in another thread
        except OSError:
            pass


def _handlers(watch: _Watch, timeout_of):
    """urllib handlers whose connections the watch sees (proxies still apply)."""

    def watched(cls):
        class Watched(cls):
            def connect(self):
                super().connect()
                self.watched_sock = self.sock

        def make(host, **kwargs):
            connection = Watched(host, **kwargs)
            watch.add(connection, timeout_of())
            return connection
        return make

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(watched(http.client.HTTPConnection), req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(watched(http.client.HTTPSConnection), req,
                                context=self._context)

    return HTTP(), HTTPS()


class OpenAIClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, concurrency: int = 4,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int = DEFAULT_RETRIES,
                 backoff: float = BACKOFF_S, max_answer_bytes: int = MAX_ANSWER_BYTES):
        self.root, self.host = endpoint_root(base_url)
        self.__key = api_key  # name-mangled: not in vars() dumps by accident
        self.concurrency = max(1, int(concurrency))
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.max_answer_bytes = max_answer_bytes
        self.retried = 0  # transient failures retried (recorded in provenance)
        self.should_stop = None  # a callable map polls while it waits (the run's stopper)
        self.on_retry = None  # a callable given a RetryNotice (the run's progress line)
        self._watch = _Watch()
        self._deadline = threading.local()
        self._opener = urllib.request.build_opener(
            _NoRedirect(), *_handlers(self._watch, lambda: self._deadline.value))

    def __repr__(self) -> str:
        return f"OpenAIClient({self.root!r}, key={'set' if self.__key else 'none'})"

    def redact(self, text: str) -> str:
        return redact_secret(text, self.__key)

    def cancel(self) -> None:
        """Shut every request in flight and refuse new ones (RequestsCancelled)."""
        self._watch.cancelled.set()
        self._watch.shut_all()

    def get(self, path: str, *, label: str | None = None) -> dict:
        return self._request("GET", path, None, label)

    def post(self, path: str, body: dict, *, label: str | None = None) -> dict:
        """The answer to `body` at `path`; `label` names the request in what `on_retry` is
        told (the item and config it is for)."""
        return self._request("POST", path, body, label)

    def _tell(self, notice: RetryNotice) -> None:
        if self.on_retry is None:
            return
        try:
            self.on_retry(notice)
        except Exception:  # what the run is told never fails the request
            pass

    def map(self, function, arguments: list) -> list:
        """function(argument) for each, at most `concurrency` at once, results in order.
        The caller's thread waits, asking `should_stop` every POLL_S: a stop, a failure or
        an interrupt shuts the other requests in flight instead of waiting for them."""
        if not arguments:
            return []
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(arguments)),
                                  thread_name_prefix="openai")
        futures = [pool.submit(function, a) for a in arguments]
        try:
            while True:
                done, pending = wait(futures, timeout=POLL_S, return_when=FIRST_EXCEPTION)
                if not pending or any(f.exception() is not None for f in done):
                    break
                if self.should_stop is not None and self.should_stop():
                    raise RequestsCancelled("stopped while requests were in flight")
            return [f.result() for f in futures]
        except BaseException:
            self.cancel()  # the run ends here: nothing should keep the process alive
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _request(self, method: str, path: str, body: dict | None,
                 label: str | None = None) -> dict:
        url = f"{self.root}/{path.lstrip('/')}"
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        where = f"{method} {self.host}/v1/{path}"
        timeouts = 0
        most = self.retries + 1  # attempts this request may get
        for attempt in range(self.retries + 1):
            if self._watch.cancelled.is_set():
                raise RequestsCancelled(f"{where}: cancelled")
            wait_s = None
            try:
                answer = self._once(url, method, data, headers, where)
                if attempt:
                    self._tell(RetryNotice(label or where, attempt + 1, most, 0.0, "",
                                           recovered=True))
                return answer
            except _Failed as exc:
                if exc.code not in RETRY_STATUS or attempt == self.retries:
                    raise ServerError(f"{where} answered HTTP {exc.code}: {exc.detail}",
                                      exc.code) from None
                wait_s = _retry_after(exc.retry_after)
                failure = f"HTTP {exc.code}"
                said = exc.detail[:MAX_REASON_CHARS]  # redacted when read (_excerpt)
                reason = f"server said HTTP {exc.code}" + (f": {said}" if said else "")
                attempts = most
            except _Expired:
                timeouts += 1
                failure = f"timed out: no whole answer within {self.timeout:g} s " \
                          "(--request-timeout)"
                # a server too slow for the deadline once is retried once; a second time
                # it is slow, not unlucky (six tries of 120 s took 738 s to fail a run)
                if attempt == self.retries or timeouts > MAX_TIMEOUT_RETRIES:
                    raise ServerError(f"{where} {failure}, {attempt + 1} attempts") from None
                reason = failure
                # the next attempt is the last should it time out too
                attempts = min(most, attempt + 2 + MAX_TIMEOUT_RETRIES - timeouts)
            except (OSError, http.client.HTTPException, urllib.error.URLError) as exc:
                if self._watch.cancelled.is_set():
                    raise RequestsCancelled(f"{where}: cancelled") from None
                reason = getattr(exc, "reason", exc)
                failure = self.redact(f"{type(reason).__name__}: {reason}")
                if attempt == self.retries:
                    raise ServerError(f"{where} failed after {self.retries + 1} attempts: "
                                      f"{failure}") from None
                reason, attempts = f"connection failed: {failure[:MAX_REASON_CHARS]}", most
            self.retried += 1
            delay = wait_s if wait_s is not None else \
                min(MAX_BACKOFF_S, self.backoff * (2 ** attempt))
            self._tell(RetryNotice(label or where, attempt + 2, attempts, float(delay),
                                   self.redact(reason)))
            if self._watch.cancelled.wait(delay):  # a cancel ends the back-off at once
                raise RequestsCancelled(f"{where}: cancelled")
        raise AssertionError("unreachable")  # the loop returns or raises

    def _once(self, url: str, method: str, data, headers: dict, where: str) -> dict:
        """One attempt, within the deadline (the watchdog shuts the socket at it)."""
        deadline = time.monotonic() + self.timeout
        self._deadline.value = deadline
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    raw = response.read(self.max_answer_bytes + 1)
            except urllib.error.HTTPError as exc:  # its message, read while watched
                raise _Failed(exc.code, _excerpt(exc, self.redact),
                              exc.headers.get("Retry-After")) from None
        except (OSError, http.client.HTTPException, urllib.error.URLError, _Failed):
            if self._watch.remove() or time.monotonic() > deadline:
                raise _Expired() from None
            raise
        if self._watch.remove() or time.monotonic() > deadline:
            raise _Expired()  # a read the watchdog cut short
        if len(raw) > self.max_answer_bytes:
            raise ServerError(f"{where} answered more than {self.max_answer_bytes:,} bytes; "
                              "not read on")
        return _json(raw, where, self.redact)


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
        text = exc.read(MAX_ERROR_BYTES).decode("utf-8", "replace")
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
