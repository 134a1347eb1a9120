"""What `run --backend openai` sends and how it reads the answers (OpenAI's legacy
completions and chat completions, as vLLM, SGLang, TGI and llama.cpp servers speak them).

- generation: temperature 0, `max_tokens` = max_new_tokens; the answer text is cut where
  the parse is decided (the parser decides, not the server; see `cut`);
- likelihood: `/v1/completions` with the option's whole text (context + continuation, the
  context's trailing whitespace moved onto the continuation as lm-eval does), `echo`,
  `logprobs: 1`, `max_tokens: 1`. The continuation's tokens are found by their text
  offsets: every echoed prompt token that ends after the context does (a token that
  straddles the boundary is counted with the continuation); their log-probabilities are
  summed, as lm-eval's `local-completions` sums `token_logprobs[ctxlen:-1]`;
- the probe (`check_echo`): before any cloze cell, the server's echoed log-probability of a
  token must equal the one it reports when it generates that token from the same prefix.
  lm-eval does not check; llama-cpp-python 0.3.36 fails (its echo values are shifted by one
  position), and a server that returns no prompt log-probabilities fails too.
"""

from __future__ import annotations

import math
from functools import partial

from runners.backends.openai.client import ServerError

# nats: a server whose echo is right agrees with itself far closer; llama-cpp-python's
# shifted echo is off by ~11 nats on the first probe text (docs/runner.md, served models)
ECHO_TOLERANCE = 0.05
# Short prefixes whose greedy next token the probe generates, then echoes.
PROBE_PREFIXES = (
    "Question: What is the capital of France?\nAnswer",
    "The capital of France is",
    "Question: Which gas do plants absorb from the air?\nAnswer:",
)


class NoPromptLogprobs(Exception):
    """The server answered an echo request without prompt log-probabilities."""


def generation_body(model: str, endpoint: str, prompt, max_tokens: int) -> tuple[str, dict]:
    """(path, body) of a greedy generation: `prompt` is text (completions) or messages."""
    body = {"model": model, "temperature": 0, "max_tokens": max_tokens}
    if endpoint == "chat":
        return "chat/completions", dict(body, messages=list(prompt))
    return "completions", dict(body, prompt=prompt)


def generated_text(answer: dict, endpoint: str) -> tuple[str, str | None]:
    """(the text, finish_reason) of the first choice."""
    try:
        choice = answer["choices"][0]
        text = choice["message"]["content"] if endpoint == "chat" else choice["text"]
    except (KeyError, IndexError, TypeError):
        raise ServerError(f"a {endpoint} answer without choices[0] text: "
                          f"{str(answer)[:200]}") from None
    return text or "", choice.get("finish_reason")


def echo_body(model: str, text: str) -> dict:
    return {"model": model, "prompt": text, "max_tokens": 1, "echo": True, "logprobs": 1,
            "temperature": 0}


def echoed(answer: dict, text: str) -> tuple[list, list, list]:
    """(tokens, token_logprobs, text_offsets) of the echoed prompt (the generated token,
    which starts at or after the prompt's end, dropped)."""
    try:
        logprobs = answer["choices"][0].get("logprobs") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ServerError(f"an echo answer without choices[0]: {str(answer)[:200]}") from None
    tokens = logprobs.get("tokens")
    values = logprobs.get("token_logprobs")
    offsets = logprobs.get("text_offset")
    if not tokens or not values or not offsets or all(v is None for v in values[1:]):
        raise NoPromptLogprobs("its echo answer holds no prompt log-probabilities")
    if not len(tokens) == len(values) == len(offsets):
        raise ServerError(f"an echo answer with {len(tokens)} tokens, {len(values)} "
                          f"log-probabilities and {len(offsets)} offsets")
    keep = [i for i, offset in enumerate(offsets) if offset < len(text)]
    return [tokens[i] for i in keep], [values[i] for i in keep], [offsets[i] for i in keep]


def continuation_loglikelihood(answer: dict, text: str, boundary: int) -> tuple[float, int]:
    """(sum of the log-probabilities of the tokens that end after `boundary`, their count)."""
    tokens, values, offsets = echoed(answer, text)
    ends = offsets[1:] + [len(text)]
    scored = [i for i, end in enumerate(ends) if end > boundary]
    if not scored:
        raise ServerError(f"the echo of {text[-40:]!r} has no token after the context")
    total = 0.0
    for i in scored:
        value = values[i]
        if value is None or not math.isfinite(float(value)):
            raise ServerError(f"no log-probability for echoed token {tokens[i]!r} at "
                              f"offset {offsets[i]} of {text[-40:]!r}")
        total += float(value)
    return total, len(scored)


SCAN_ALL = 64  # an answer up to this many steps is scanned step by step, as before


def _first_decided(count: int, decided_at) -> int | None:
    """The smallest k in 1..count with decided_at(k), or None. A short answer is scanned
    step by step; a long one (a server ignoring max_tokens) by bisection, which relies on
    a decided parse staying decided as text is added (what `decided` means: no
    continuation can change it), so a 64 KB answer costs ~17 parses, not 65,536."""
    if count <= SCAN_ALL:
        return next((k for k in range(1, count + 1) if decided_at(k)), None)
    if not decided_at(count):
        return None
    lo, hi = 1, count
    while lo < hi:
        mid = (lo + hi) // 2
        if decided_at(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def cut(request, text: str, finish_reason: str | None, tokenizer=None) -> tuple[str, str]:
    """(the text up to where the parse is decided, why it stops). With the model's local
    tokenizer, the text is re-encoded and cut where the transformers path stops
    (runners.plan.score_types.stop_reason's rule, token by token, decoded by the same call);
    without it, at the shortest prefix for which the parser's `decided` holds. Else the
    whole text, stopped at EOS or length. A prefix ending in half a character (U+FFFD) is
    never where it stops."""
    undecided = "eos" if finish_reason == "stop" else "length"
    if tokenizer is not None:
        decode = partial(tokenizer.decode, skip_special_tokens=True)  # as Scorer._text
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        prefix = lambda k: decode(ids[:k])  # noqa: E731
    else:
        ids, prefix = text, lambda k: text[:k]  # noqa: E731

    def decided_at(k: int) -> bool:
        piece = prefix(k)
        return not piece.endswith("\ufffd") and request.decided(piece)

    first = _first_decided(len(ids), decided_at)
    return (prefix(first), "decided") if first is not None else (text, undecided)


# Answers that say for good that a request is not served (a retry cannot change them);
# anything else (a 5xx or 429 after the retries, a time-out, a reset) says nothing about
# the server's echo, and refusing the cloze configs on it would finish a run without them.
DEFINITE_STATUS = frozenset({400, 401, 403, 404, 405, 422, 501})


def _definite(exc: ServerError) -> ServerError:
    """exc when it is the server's definite answer, else re-raised: the probe could not ask."""
    if exc.status in DEFINITE_STATUS:
        return exc
    raise ProbeUnanswered(f"the echo probe got no answer ({exc}); nothing was refused: run "
                          "again (or --resume) once the server answers") from None


class ProbeUnanswered(ServerError):
    """The probe's request failed in a way that says nothing about the server's echo."""


def check_echo(client, model: str) -> tuple[str | None, list]:
    """(None when the server's echo log-probabilities can be trusted, else the reason; the
    comparisons made: prefix, token, echoed, generated). A request that fails without a
    definite answer raises ProbeUnanswered instead of refusing the cloze configs."""
    compared = []
    for prefix in PROBE_PREFIXES:
        try:
            answer = client.post("completions", {"model": model, "prompt": prefix,
                                                 "max_tokens": 1, "temperature": 0,
                                                 "logprobs": 1})
            choice = answer["choices"][0]
            token = choice["text"]
            generated = (choice.get("logprobs") or {}).get("token_logprobs") or [None]
        except ServerError as exc:
            return (f"the server returns no prompt log-probabilities (its /v1/completions "
                    f"request failed: {_definite(exc)})"), compared
        except (KeyError, IndexError, TypeError):
            return "its completions answer has no choices[0].text", compared
        if not token or generated[0] is None:
            continue  # EOS, or no generation log-probability: nothing to compare here
        text = prefix + token
        try:
            tokens, values, offsets = echoed(client.post("completions", echo_body(model, text)),
                                             text)
        except NoPromptLogprobs as exc:
            return f"the server returns no prompt log-probabilities ({exc})", compared
        except ServerError as exc:
            return (f"the server returns no prompt log-probabilities (its echo request "
                    f"failed: {_definite(exc)})"), compared
        at = [i for i, o in enumerate(offsets) if o == len(prefix)]
        if not at or tokens[at[0]] != token or values[at[0]] is None:
            continue  # the echo tokenised the boundary otherwise: not comparable
        echo_value, gen_value = float(values[at[0]]), float(generated[0])
        compared.append({"prefix": prefix, "token": token, "echoed": echo_value,
                         "generated": gen_value})
        if abs(echo_value - gen_value) > ECHO_TOLERANCE:
            return (f"its echo log-probabilities disagree with its own generation: after "
                    f"{prefix!r} the token {token!r} is echoed at {echo_value:.4g} but "
                    f"generated at {gen_value:.4g} (echo values shifted by a position?)"), \
                compared
    if not compared:
        return ("the probe found no token to compare echoed and generated "
                "log-probabilities on"), compared
    return None, compared
