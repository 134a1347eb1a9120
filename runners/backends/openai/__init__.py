"""The openai backend: a model an OpenAI-compatible server serves (`run --backend openai`).

`backend` prepares the served model (its identity asked of the server) and scores through
`client` (stdlib HTTP) and `protocol` (how requests are built and answers read).
"""

from __future__ import annotations

from collections.abc import MutableMapping

from runners.backends.base import configure_allocator, register_backend

SCORING_TEXT = {
    "padding": "none on our side: one HTTP request per prompt (the server batches)",
    "decoding": "greedy (temperature 0, max_tokens = max_new_tokens) on the server; the "
                "answer text is cut where the parse is decided "
                "(runners.backends.openai.protocol.cut)",
    "likelihood": "lm-eval loglikelihood from /v1/completions echo log-probabilities of "
                  "context + continuation, continuation tokens found by text offset; "
                  "acc_norm = ll / option length in characters",
}


@register_backend("openai")
class OpenAIBackend:
    name = "openai"
    overlaps_host_work = False  # no local model calls to overlap with

    def __init__(self):
        from fragility_tui.backends import backend_info

        self.info = backend_info(self.name)

    def configure_process(self, environ: MutableMapping[str, str]) -> dict:
        return configure_allocator(environ)  # recorded as for every run (no CUDA is used)

    def prepare(self, spec, device: str) -> list:
        from runners.backends.openai.backend import prepare_served

        return [prepare_served(spec)]  # the server's devices, not `device`

    def load(self, prepared, spec) -> tuple:
        from runners.backends.openai.backend import load_served

        return load_served(prepared, spec)

    def budget(self, spec, loaded, scorer):
        return scorer.token_budget(spec.batch_tokens, spec.batch_size)

    def scoring_text(self) -> dict:
        return dict(SCORING_TEXT)

    def text_encoder(self, scorer):
        return scorer.encoder

    def watch_stop(self, scorer, should_stop) -> None:
        scorer.stop_when(should_stop)  # a stop shuts the requests in flight

    def watch_retries(self, scorer, on_event) -> None:
        scorer.tell_retries(on_event)  # the progress line says a request waits to be retried
