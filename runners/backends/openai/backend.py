"""`fragility-tui run --backend openai`: evaluate a model an OpenAI-compatible server
serves (vLLM, SGLang, TGI, llama.cpp, a hosted API) with the same items, 26 configs, cells,
resume, cancel and shards as the local backends.

The planner's request slots carry what is sent rather than token ids (`Sent`: the UTF-8
bytes of the prompt text or of the chat messages' JSON, so prompt hashes and batch sizes
still have something to measure); the scorer answers with the transformers scorer's
BatchResult, plus the server's own token counts (`usage`) and seconds per request, so
`cells_for` and the run loop do not know which backend ran. Protocol details:
runners/backends/openai/protocol.py; HTTP, retries and the API key: runners/backends/openai/client.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from fragility_tui.errors import InputError
from fragility_tui.harness.configs import get_config
from fragility_tui.harness.parser import PARSER_VERSION
from fragility_tui.text import CELL_TEXT_CAP as RAW_OUTPUT_CAP, capped  # noqa: F401
from fragility_tui.harness.render import PROMPT_VERSION
from runners.plan.budget import SchedulesOwnMemory
from runners.backends.openai.client import DEFAULT_TIMEOUT_S, OpenAIClient, ServerError, read_api_key
from runners.backends.openai.protocol import (ProbeUnanswered, check_echo,
                                              continuation_loglikelihood, cut, echo_body,
                                              generated_text, generation_body)
from runners.plan.score_types import BatchResult, GenResult, ScoreStats

ENDPOINTS = ("completions", "chat")
DEFAULT_CONCURRENCY = 4
DEFAULT_BATCH_BYTES = 1 << 15  # prompt bytes per batch (one store transaction)


def server_options(spec) -> dict:
    """The run's server settings (RunSpec.server), checked: base_url, served_model,
    api_key_env, concurrency, endpoint."""
    server = dict(spec.server or {})
    if not server.get("base_url"):
        raise InputError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)",
                         field="--base-url")
    if not server.get("served_model"):
        raise InputError("--backend openai needs --served-model (an id /v1/models lists)",
                         field="--served-model")
    server.setdefault("endpoint", "completions")
    if server["endpoint"] not in ENDPOINTS:
        raise InputError(f"--endpoint must be completions or chat, got {server['endpoint']!r}",
                         field="--endpoint")
    server["concurrency"] = int(server.get("concurrency") or DEFAULT_CONCURRENCY)
    if server["concurrency"] < 1:
        raise InputError("--concurrency must be at least 1", field="--concurrency")
    if spec.quantize:
        raise InputError("--quantize quantises local weights; a served model is served as "
                         "it is", field="--quantize")
    if len(spec.models) > 1:
        raise InputError("--backend openai evaluates one served model per run; --model "
                         "(optional) names its local tokenizer", field="--model")
    return server


def make_client(server: dict) -> OpenAIClient:
    # timeout_s: --request-timeout, the whole request (runs recorded before it: the default)
    return OpenAIClient(server["base_url"], api_key=read_api_key(server.get("api_key_env")),
                        concurrency=server["concurrency"],
                        timeout=float(server.get("timeout_s") or DEFAULT_TIMEOUT_S))


@dataclass
class ServedModel:
    """What prepare_models hands the loop for a served model (cf. runners.models.prepare)."""

    name: str
    fingerprint: dict
    server: dict
    client: OpenAIClient
    served_id: str
    prompt_mode: str  # chat | raw
    template: str  # how generation prompts are rendered, in words
    local: object | None  # runners.models.prepare.PreparedModel of --model (its tokenizer), if given
    refused: dict = field(default_factory=dict)  # config id -> why it is not run
    probe: list = field(default_factory=list)  # the echo probe's comparisons
    spec: str | None = None

    @property
    def refusal(self) -> str:
        """The one line that names the refused configs and says why."""
        return (f"{self.name}: configs {', '.join(sorted(self.refused))} refused (not run): "
                + "; ".join(sorted(set(self.refused.values()))) + "; the other configs run")


def prepare_served(spec) -> ServedModel:
    """The served model's identity, checked against the server before any run row: the
    model id as /v1/models lists it, one generation on the chosen endpoint (and its
    system_fingerprint), and the echo probe when the run has cloze configs."""
    from runners.models.prepare import prepare_model

    server = server_options(spec)
    client = make_client(server)
    endpoint = server["endpoint"]
    try:
        listed = [m.get("id") for m in client.get("models").get("data") or []]
    except (ServerError, AttributeError) as exc:
        raise InputError(f"cannot list the served models at {client.host}: {exc}",
                         field="--base-url") from None
    served_id = server["served_model"]
    if served_id not in listed:
        raise InputError(f"{client.host} does not serve {served_id!r}; /v1/models lists: "
                         f"{', '.join(map(str, listed)) or 'nothing'}", field="--served-model")
    local = None
    if spec.models:  # the local tokenizer: our chat template, and the weights' identity
        mode = "raw" if endpoint == "chat" else spec.prompt_mode
        local = prepare_model(spec.models[0], name=spec.name, device="cpu", mode=mode,
                              max_new_tokens=spec.max_new_tokens,
                              trust_remote_code=spec.trust_remote_code)
    if endpoint == "chat":
        if spec.prompt_mode == "raw":
            raise InputError("--endpoint chat sends chat messages; raw prompts go through "
                             "--endpoint completions", field="--prompt-mode")
        mode, template = "chat", "the server's chat template (/v1/chat/completions)"
    elif local is not None:
        mode = local.prompt_mode
        template = ("our rendering of the local tokenizer's chat template, sent as text"
                    if mode == "chat" else "raw prompt text")
    else:
        if spec.prompt_mode == "chat":
            raise InputError("--prompt-mode chat with --endpoint completions applies the chat "
                             "template here: give --model with the model's tokenizer, or use "
                             "--endpoint chat", field="--prompt-mode")
        mode, template = "raw", "raw prompt text"
    hello = ([{"role": "user", "content": "Hello"}] if endpoint == "chat" else "Hello")
    path, body = generation_body(served_id, endpoint, hello, 1)
    try:
        answer = client.post(path, body)
    except ServerError as exc:
        raise InputError(f"the server at {client.host} refused a one-token "
                         f"/v1/{path} request: {exc}", field="--endpoint") from None
    fingerprint = {
        "backend": "openai", "endpoint_host": client.host, "served_model": served_id,
        "endpoint": endpoint, "system_fingerprint": answer.get("system_fingerprint"),
        "chat_template": template, "device_type": "server",
        "weights_sha256": local.weights_sha256 if local else None,
        "revision": local.resolved.revision if local else None,
        "gguf_quant": local.gguf_quant if local else None,
        "tokenizer_sha256": local.fingerprint["tokenizer_sha256"] if local else None,
        "chat_template_sha256": (local.fingerprint["chat_template_sha256"]
                                 if local and mode == "chat" and endpoint != "chat" else None),
        "template_args": dict(local.template_args) if local and endpoint != "chat" else {},
        "max_new_tokens": spec.max_new_tokens, "parser_version": PARSER_VERSION,
        "prompt_version": PROMPT_VERSION, "prompt_mode": mode, "quantization": None,
    }
    served = ServedModel(spec.name or (local.name if local else served_id), fingerprint,
                         server, client, served_id, mode, template, local,
                         spec=spec.models[0] if spec.models else None)
    scored = [c for c in spec.configs if get_config(c).scores_options]  # cloze and .lik
    if scored:
        try:
            reason, served.probe = check_echo(client, served_id)
        except ProbeUnanswered as exc:  # before the run row: a resumed record stays as it is
            raise InputError(f"{client.host}: {exc}", field="--base-url") from None
        if reason:
            served.refused = {c: reason for c in scored}
    served.refused.update({c: SERVER_PROMPT for c in spec.configs
                           if get_config(c).bos or get_config(c).template})
    return served


SERVER_PROMPT = ("a server tokenizes and templates the prompt itself, so +bos, +nobos, +raw "
                 "and +chat run with --backend transformers")




class Sent(list):
    """A request in the planner's token slot: the UTF-8 bytes of what is sent (so the
    cell's prompt_sha hashes exactly that), with the request itself alongside."""

    def __init__(self, text: str, payload=None, boundary: int | None = None):
        super().__init__(text.encode())
        self.text, self.payload, self.boundary = text, payload, boundary


@dataclass
class ServedEncoder:
    """runners.plan.item_requests.Encoder's interface, producing what the server is sent."""

    endpoint: str
    tokenizer: object | None = None  # the local tokenizer, when our chat template applies
    template_args: dict = field(default_factory=dict)

    def generation(self, prompt, *, chat=None, bos=None) -> Sent:
        # chat and bos: a served run refuses the configs that set them (SERVER_PROMPT)
        if self.endpoint == "chat":
            messages = [dict(m) for m in prompt.messages]
            return Sent(json.dumps(messages, sort_keys=True), messages)
        if self.tokenizer is not None:
            from runners.models.fingerprint import pinned_date

            with pinned_date():
                text = self.tokenizer.apply_chat_template(
                    list(prompt.messages), tokenize=False, add_generation_prompt=True,
                    **self.template_args)
            return Sent(text, text)
        return Sent(prompt.text, prompt.text)

    def cloze(self, context: str, continuation: str, *, bos=None) -> tuple[Sent, int]:
        spaces = len(context) - len(context.rstrip())  # lm-eval: the space goes with the option
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        sent = Sent(context + continuation, context + continuation, len(context))
        return sent, len(context.encode())


def load_served(served: ServedModel, spec):
    """(LoadedModel, OpenAIScorer): nothing loads; the tokenizer is the local one, if any."""
    from runners.models.load import LoadedModel

    local = served.local
    chat_here = served.server["endpoint"] == "completions" and served.prompt_mode == "chat"
    encoder = ServedEncoder(served.server["endpoint"], local.tokenizer if chat_here else None,
                            dict(local.template_args) if chat_here else {})
    loaded = LoadedModel(name=served.name, base_model=None, model=None,
                         tokenizer=local.tokenizer if local else None, device="server",
                         dtype="server's", quantization=None,
                         is_instruct=served.prompt_mode == "chat", add_bos=False,
                         eos_ids=frozenset(), fingerprint=served.fingerprint)
    loaded.provenance = {
        "spec": served.spec, "source": f"openai:{served.client.host}", "kind": "served",
        "revision": served.fingerprint["revision"], "served_model": served.served_id,
        "endpoint": served.server["endpoint"], "endpoint_host": served.client.host,
        "concurrency": served.client.concurrency, "weights_sha256":
            served.fingerprint["weights_sha256"], "dtype": "chosen by the server",
        "quantization": None, "base_model": None, "device": "server",
        "prompt_mode": ("chat template" if served.prompt_mode == "chat" else "raw prompt"),
        "template": served.template, "template_args": served.fingerprint["template_args"],
        "attn_implementation": "chosen by the server",
        "backend": {"name": "openai", "endpoint": served.server["endpoint"],
                    "system_fingerprint": served.fingerprint["system_fingerprint"],
                    "api_key": "sent" if served.server.get("api_key_env") else "none"},
        "refused_configs": dict(served.refused), "echo_probe": list(served.probe),
        "fingerprint": served.fingerprint,
    }
    scorer = OpenAIScorer(served.client, served.served_id, served.server["endpoint"],
                          spec.max_new_tokens, encoder)
    scorer.tokenizer = local.tokenizer if local else None  # cuts answers as transformers does
    return loaded, scorer


class OpenAIScorer(SchedulesOwnMemory):
    """Scores a batch of requests against the server; runners.backends.transformers.scoring.Scorer's interface."""

    budget_flag = "--batch-tokens (prompt bytes)"
    budget_default = DEFAULT_BATCH_BYTES
    budget_source = ("openai backend default: prompt bytes per batch (a batch is one store "
                     "transaction)")
    kv_bytes_per_token = None

    def __init__(self, client: OpenAIClient, model: str, endpoint: str, max_new_tokens: int,
                 encoder: ServedEncoder):
        self.client, self.model, self.endpoint = client, model, endpoint
        self.max_new_tokens, self.encoder = max_new_tokens, encoder
        self.tokenizer = None  # the local tokenizer, when --model names one

    def stop_when(self, should_stop) -> None:
        """The run's stop check (SIGTERM, ctrl+c, `runs cancel`), asked while requests are
        in flight: a stop shuts them instead of waiting for a slow server."""
        self.client.should_stop = should_stop

    def tell_retries(self, on_event) -> None:
        """The run's event callback, `on_event(kind, **fields)`, told of each request that
        waits to be retried (`request_retry`: what was asked, why it failed, the attempt
        about to be made of the most it gets, the wait) and of each retried request
        answered (`request_recovered`): the progress line says so while it lasts."""
        self.client.on_retry = lambda notice: on_event(notice.event, **notice.fields())

    @property
    def layout(self) -> str:
        return (f"one HTTP request per prompt to {self.client.host}, at most "
                f"{self.client.concurrency} in flight; the server batches and caches")

    def score(self, gen: list, lik: list, *, max_slots: int | None = None) -> BatchResult:
        started = time.perf_counter()
        answers = self.client.map(self._one, [(True, r) for r in gen] +
                                  [(False, r) for r in lik])
        result = BatchResult()
        stats = result.stats
        for (value, usage, seconds), request in zip(answers, gen + lik):
            if isinstance(value, GenResult):
                result.generations[request.key] = value
            else:
                result.loglikelihoods[request.key] = value
            result.prompt_tokens[request.key] = usage.get("prompt_tokens")
            result.seconds[request.key] = seconds
            stats.prompt_tokens += usage.get("prompt_tokens") or 0
            stats.decode_tokens += usage.get("completion_tokens") or 0
        stats.total_prompt_tokens = stats.unique_prompt_tokens = stats.prompt_tokens
        stats.seconds = time.perf_counter() - started
        return result

    def _one(self, job):
        is_generation, request = job
        sent: Sent = request.tokens
        t0 = time.perf_counter()
        if is_generation:
            path, body = generation_body(self.model, self.endpoint, sent.payload,
                                         self.max_new_tokens)
            answer = self.client.post(path, body, label=request_label(request.key))
            text, finish = generated_text(answer, self.endpoint)
            text, stop = cut(request, text, finish, self.tokenizer)
            usage = answer.get("usage") or {}
            stored = capped(self.client.redact(text))  # parsed as given
            value = GenResult(text, int(usage.get("completion_tokens") or 0), stop,
                              stored_text=stored if stored != text else None)
        else:
            answer = self.client.post("completions", echo_body(self.model, sent.text),
                                      label=request_label(request.key))
            value = continuation_loglikelihood(answer, sent.text, sent.boundary)
            usage = answer.get("usage") or {}
        return value, usage, time.perf_counter() - t0


def request_label(key) -> str:
    """A request named for the progress line: "item mmlu/0042, config o0.letter" (and the
    option a likelihood request scores)."""
    if not isinstance(key, tuple) or len(key) < 2:
        return f"request {key}"
    label = f"item {key[0]}, config {key[1]}"
    return label + (f", option {key[2]}" if len(key) > 2 else "")
