"""The vLLM backend of `fragility-tui run --backend vllm` (experimental: not yet run on a GPU).

Same requests in, same results out. The item planner's token ids (runners.plan.item_requests:
the chat or raw generation prompts, and lm-eval's `context_enc + continuation_enc` for each
option) go to an offline `vllm.LLM` as token-id prompts, and the answers come back as the
transformers scorer's BatchResult, so `cells_for` and the run loop do not know which
backend ran:

- generation: greedy (temperature 0), at most max_new_tokens, stopping at the model's EOS
  ids; the transformers path's early stop (runners.plan.score_types.stop_reason: EOS, parse decided,
  length) is then replayed over the generated token ids, so `raw_output` is the text up to
  the decision, decoded by the same tokenizer call as on the transformers path;
- likelihood: one request per option asking for prompt log-probabilities
  (`prompt_logprobs`, `max_tokens=1`); the score is the sum, over the continuation's
  positions i, of prompt_logprobs[i][tokens[i]] (how lm-eval's own vLLM backend reads them);
- prefix caching on (`--no-prefix-reuse` turns it off): an item's 24 generation prompts
  share their stems. vLLM does not read the prefix cache for a request that asks for prompt
  log-probabilities (a cached position would have none), so cloze requests are computed
  whole, as lm-eval computes them.

`vllm` is imported here only, and only when the backend runs. Tests drive the scorer with a
fake engine of vLLM's interface (tests/runners/test_vllm_backend.py); no real vLLM engine
has run this code yet.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import time
from functools import partial

from fragility_tui.errors import InputError
from runners.plan.budget import RAMP_STEPS, SchedulesOwnMemory
from runners.plan.prefix_tree import build_tree, count_tokens
from runners.models.provenance import model_provenance
from runners.backends.base import LocalBackend, register_backend
from runners.plan.score_types import BatchResult, GenResult, ScoreStats, stop_reason

VLLM_INSTALL = "pip install -e '.[vllm]'"
EXPERIMENTAL = "experimental: not yet run on a GPU"
GPU_MEMORY_UTILIZATION = 0.85  # when the GPU's memory is unknown (a fake engine in tests)
MAX_UTILIZATION = 0.9  # the most of a GPU vLLM may take for weights, activations and KV cache
# Prompt log-probabilities: vLLM computes, for every prompt token of a step, fp32 logits
# over the vocabulary, their log-softmax and a gathered copy, and its start-up memory
# profiling runs no such request: that memory has to stay outside its share.
PROMPT_LOGPROB_COPIES = 3
MAX_BATCHED_TOKENS = 8192  # prompt tokens per engine step (max_num_batched_tokens)
MIN_BATCHED_TOKENS = 2048
ENGINE_RESERVE = 2 << 30  # CUDA context, cuBLAS workspaces, the sampler's own temporaries
DEFAULT_BATCH_TOKENS = 1 << 16  # unique prompt tokens per batch (one store transaction)
VLLM_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# Where vLLM keeps its batch-invariant kernels: 0.30.0 (the [vllm] extra's pin, read from
# its wheel) under model_executor/determinism/; earlier releases under layers/.
BATCH_INVARIANT_MODULES = ("vllm.model_executor.determinism.batch_invariant",
                           "vllm.model_executor.layers.batch_invariant")


# -- before anything loads ------------------------------------------------------------------

def installed_version() -> str | None:
    """vLLM's version, or None when it is not installed (nothing is imported)."""
    if importlib.util.find_spec("vllm") is None:
        return None
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def check_backend(quantize: str | None, device: str) -> str:
    """What `--backend vllm` needs, checked before the run row is written: no --quantize,
    vLLM installed, a CUDA device. Returns vLLM's version."""
    if quantize:
        raise InputError("--quantize quantises with optimum-quanto for the transformers "
                         "backend; with --backend vllm give a model already quantised in a "
                         "format vLLM loads", field="--quantize")
    version = installed_version()
    if version is None:
        raise InputError(f"--backend vllm ({EXPERIMENTAL}) needs vLLM, which is not "
                         f"installed: {VLLM_INSTALL} on a machine with an NVIDIA GPU, or use "
                         "--backend transformers", field="--backend")
    from runners.models.load import pick_device

    device = pick_device(device)
    if not device.startswith("cuda"):
        raise InputError(f"--backend vllm runs on a CUDA GPU; this run's device is {device}",
                         field="--device")
    if device not in ("cuda", "cuda:0"):
        raise InputError(f"--backend vllm runs on the first visible GPU: for {device} set "
                         f"CUDA_VISIBLE_DEVICES={device.split(':')[1]} and use --device cuda",
                         field="--device")
    return version


# -- loading ----------------------------------------------------------------------------------

def engine_settings(prepared, spec, sizing: dict) -> dict:
    """The engine's settings, all explicit (and recorded in provenance as they are)."""
    return {"dtype": VLLM_DTYPES[prepared.dtype], "seed": 0, "tensor_parallel_size": 1,
            "gpu_memory_utilization": sizing["gpu_memory_utilization"],
            "max_num_batched_tokens": sizing["max_num_batched_tokens"],
            "enable_prefix_caching": bool(spec.prefix_reuse),
            "trust_remote_code": bool(spec.trust_remote_code)}


def engine_memory(total_bytes: int | None, vocab_size: int,
                  free_bytes: int | None = None) -> dict:
    """gpu_memory_utilization and max_num_batched_tokens for prompt-log-probability
    requests: the step's vocabulary-sized fp32 tensors (PROMPT_LOGPROB_COPIES of
    max_num_batched_tokens x vocab) plus ENGINE_RESERVE stay outside vLLM's share. The step
    shrinks (down to MIN_BATCHED_TOKENS) while those tensors would take over a quarter of
    the GPU.

    The share is a fraction of the GPU's total memory, but vLLM (0.30: `request_memory` in
    vllm/v1/worker/utils.py) refuses to start when the memory free at its start is below
    total x share; so the share is sized from what is free (`free_bytes`, default: all of
    it), not from the total: another process, or this one's own tensors, may hold the rest."""
    if total_bytes is None:
        return {"gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
                "max_num_batched_tokens": MAX_BATCHED_TOKENS,
                "reason": "GPU memory unknown: vLLM's defaults for this backend"}
    free = total_bytes if free_bytes is None else min(free_bytes, total_bytes)
    tokens = MAX_BATCHED_TOKENS
    per_token = vocab_size * 4 * PROMPT_LOGPROB_COPIES
    while tokens > MIN_BATCHED_TOKENS and tokens * per_token > total_bytes / 4:
        tokens //= 2
    outside = tokens * per_token + ENGINE_RESERVE
    utilization = min(MAX_UTILIZATION, (free - outside) / total_bytes)
    if utilization < 0.3:
        raise InputError(f"--backend vllm: prompt log-probabilities over a {vocab_size}-token "
                         f"vocabulary need {outside / 2**30:.1f} GiB beside the engine, and "
                         f"{free / 2**30:.1f} GiB of the {total_bytes / 2**30:.1f} GiB GPU "
                         "are free; free the GPU or use --backend transformers",
                         field="--backend")
    return {"gpu_memory_utilization": round(utilization - 0.0005, 3),  # rounded down
            "max_num_batched_tokens": tokens,
            "reason": (f"{tokens} prompt tokens per step x {vocab_size} vocabulary x 4 bytes x "
                       f"{PROMPT_LOGPROB_COPIES} copies + {ENGINE_RESERVE >> 30} GiB reserve "
                       f"kept outside the engine's share of the {free / 2**30:.1f} GiB free "
                       f"of {total_bytes / 2**30:.1f} GiB")}


def batch_invariance(environ=None) -> dict:
    """Turn on vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1: results independent of
    batch size and request order) where the installed vLLM has it and the GPU supports it
    (compute capability 9.0 or later, per vLLM's docs), unless the user set the variable.
    Must run before vllm is imported: vLLM reads it once."""
    import os

    environ = os.environ if environ is None else environ
    if "VLLM_BATCH_INVARIANT" in environ:
        return {"enabled": environ["VLLM_BATCH_INVARIANT"] not in ("", "0"),
                "reason": "VLLM_BATCH_INVARIANT set by the user"}
    has_it = any(_module_exists(name) for name in BATCH_INVARIANT_MODULES)
    if not has_it:
        return {"enabled": False, "reason": f"vLLM {installed_version()} has no batch-invariant mode"}
    import torch

    capability = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    if capability is None or capability < (9, 0):
        return {"enabled": False, "reason": f"GPU compute capability {capability}: vLLM's "
                                            "batch-invariant kernels need 9.0 or later"}
    environ["VLLM_BATCH_INVARIANT"] = "1"
    return {"enabled": True, "reason": "VLLM_BATCH_INVARIANT=1 set by fragility-tui"}


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing (vllm, or an older layout)
        return False


def open_engine(folder, settings: dict):
    """(an offline vllm.LLM over the model folder, vllm.SamplingParams)."""
    import vllm

    engine = vllm.LLM(model=str(folder), tokenizer=str(folder), **settings)
    return engine, vllm.SamplingParams


def load_vllm(prepared, spec, invariance: dict | None = None):
    """(LoadedModel, VLLMScorer) for a prepared model. The tokenizer, prompt mode and EOS ids
    are read as the transformers backend reads them; vLLM reads the weights (a GGUF file
    through the folder it is converted into for the transformers backend)."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    from runners.models.load import LoadedModel, converted_gguf_folder, eos_ids, pick_dtype

    resolved = prepared.resolved
    folder = (converted_gguf_folder(resolved.path, prepared.weights_sha256,
                                    pick_dtype(prepared.dtype, prepared.device)[1])
              if resolved.kind == "gguf" else resolved.path)
    remote = spec.trust_remote_code
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=remote)
    try:
        generation = GenerationConfig.from_pretrained(folder)
    except OSError:  # no generation_config.json: what transformers derives from the config
        generation = GenerationConfig.from_model_config(
            AutoConfig.from_pretrained(folder, trust_remote_code=remote))
    stop_ids = eos_ids(generation, tokenizer)
    config = AutoConfig.from_pretrained(folder, trust_remote_code=remote)
    vocab = getattr(config.get_text_config(), "vocab_size", None) or len(tokenizer)
    free, total = _gpu_memory(prepared.device)
    sizing = engine_memory(total, vocab, free)
    if invariance is None:  # not set up by VLLMBackend.configure_process
        invariance = batch_invariance()  # before open_engine imports vllm
    settings = engine_settings(prepared, spec, sizing)
    engine, sampling_params = open_engine(folder, settings)
    loaded = LoadedModel(
        name=prepared.name, base_model=None, model=engine, tokenizer=tokenizer,
        device=prepared.device, dtype=prepared.dtype, quantization=None,
        is_instruct=prepared.prompt_mode == "chat", add_bos=prepared.fingerprint["add_bos"],
        eos_ids=stop_ids, template_args=dict(prepared.template_args),
        fingerprint=prepared.fingerprint)
    loaded.provenance = _provenance(prepared, loaded, settings, sizing, invariance)
    scorer = VLLMScorer(engine, tokenizer, stop_ids, max_new_tokens=spec.max_new_tokens,
                        sampling_params=sampling_params,
                        prefix_caching=settings["enable_prefix_caching"])
    return loaded, scorer


def _gpu_memory(device: str) -> tuple[int | None, int | None]:
    """(free, total) bytes of the run's GPU, read just before the engine starts."""
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None, None
    free, total = torch.cuda.mem_get_info(torch.device(device))
    return int(free), int(total)


def _provenance(prepared, loaded, settings: dict, sizing: dict, invariance: dict) -> dict:
    prov = model_provenance(prepared, loaded, None)
    prov["attn_implementation"] = "vllm (the engine's attention backend)"
    prov["backend"] = {"name": "vllm", "version": installed_version(), "status": EXPERIMENTAL,
                       "engine": dict(settings), "memory_sizing": sizing["reason"],
                       "batch_invariant": invariance}
    return prov


# -- scoring ----------------------------------------------------------------------------------

class VLLMScorer(SchedulesOwnMemory):
    """Scores a batch of the planner's requests with a vLLM engine; the same interface and
    result as runners.backends.transformers.scoring.Scorer."""

    budget_flag = "--batch-tokens"
    budget_default = DEFAULT_BATCH_TOKENS
    ramp_steps = RAMP_STEPS  # on the GPU: its first batch starts before much is planned
    budget_source = ("vLLM backend default (the engine schedules its own memory; a batch is one "
                     "store transaction)")
    kv_bytes_per_token = None  # vLLM sizes its own (paged) KV cache

    def __init__(self, engine, tokenizer, eos_ids, *, max_new_tokens: int, sampling_params,
                 prefix_caching: bool = True):
        self.engine = engine
        self.eos_ids = frozenset(eos_ids)
        self.max_new_tokens = max_new_tokens
        self.prefix_caching = prefix_caching
        self._text = partial(tokenizer.decode, skip_special_tokens=True)  # as Scorer._text
        # detokenize=False: the text is decoded here, with the transformers path's call.
        self.generation_params = sampling_params(
            temperature=0.0, max_tokens=max_new_tokens, stop_token_ids=sorted(self.eos_ids),
            detokenize=False)
        self.likelihood_params = sampling_params(temperature=0.0, max_tokens=1,
                                                 prompt_logprobs=1, detokenize=False)

    @property
    def layout(self) -> str:
        caching = ("on (cloze requests, which ask for prompt log-probabilities, bypass it)"
                   if self.prefix_caching else "off")
        return ("vLLM engine: a batch's prompts as token ids in one LLM.generate call, paged "
                f"attention, prefix caching {caching}")

    def score(self, gen: list, lik: list, *, max_slots: int | None = None) -> BatchResult:
        """Score a batch in one engine call (`max_slots` is the transformers scorer's bound
        on a decoder call; vLLM schedules its own)."""
        started = time.perf_counter()
        sequences = [r.tokens for r in gen] + [r.tokens for r in lik]
        if any(len(s) == 0 for s in sequences):
            raise ValueError("empty prompt")
        prompts = [{"prompt_token_ids": list(tokens)} for tokens in sequences]  # TokensPrompt
        params = [self.generation_params] * len(gen) + [self.likelihood_params] * len(lik)
        outputs = list(self.engine.generate(prompts, params, use_tqdm=False)) if prompts else []
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} "
                               "prompts")
        result = BatchResult()
        for request, output in zip(gen, outputs):
            result.generations[request.key] = self._cut(request, output.outputs[0])
        for request, output in zip(lik, outputs[len(gen):]):
            result.loglikelihoods[request.key] = continuation_loglikelihood(
                request, output.prompt_logprobs)
        result.stats = _stats(sequences, outputs, len(gen))
        result.stats.seconds = time.perf_counter() - started
        return result

    def _cut(self, request, completion) -> GenResult:
        """The engine's greedy tokens, cut where the transformers path stops."""
        tokens, stop = [], None
        for token in completion.token_ids:
            stop = stop_reason(request, tokens, token, self.eos_ids, self.max_new_tokens,
                               self._text)
            if stop:
                break
        if stop is None:  # the engine stopped first: at a stop id of its own, or its length
            stop = "eos" if completion.finish_reason == "stop" else "length"
        return GenResult(self._text(tokens), len(tokens), stop)


def continuation_loglikelihood(request, prompt_logprobs) -> tuple[float, int]:
    """(sum of the continuation tokens' log-probabilities, their count) from vLLM's
    prompt_logprobs: per prompt position a {token id: Logprob} dict, None at position 0."""
    tokens = request.tokens
    if prompt_logprobs is None or len(prompt_logprobs) != len(tokens):
        got = "none" if prompt_logprobs is None else len(prompt_logprobs)
        raise RuntimeError(f"vLLM returned {got} prompt log-probabilities for the "
                           f"{len(tokens)}-token prompt of {request.key}")
    total = 0.0
    for position in range(request.scored_from, len(tokens)):
        entry = prompt_logprobs[position]
        logprob = entry.get(tokens[position]) if entry else None
        if logprob is None:
            raise RuntimeError(f"vLLM returned no log-probability for token {tokens[position]} "
                               f"at position {position} of {request.key}")
        total += float(getattr(logprob, "logprob", logprob))
    return total, len(tokens) - request.scored_from


def _stats(sequences: list, outputs: list, n_gen: int) -> ScoreStats:
    """Prompt tokens the engine computed (by its own count of prefix-cache hits, where it
    reports one) and the tokens it generated (also those past the early-stop cut)."""
    stats = ScoreStats()
    stats.total_prompt_tokens = sum(map(len, sequences))
    stats.unique_prompt_tokens = count_tokens(build_tree(sequences, share=True))
    cached = sum(getattr(output, "num_cached_tokens", None) or 0 for output in outputs)
    stats.prompt_tokens = stats.total_prompt_tokens - cached
    stats.decode_tokens = sum(len(output.outputs[0].token_ids) for output in outputs[:n_gen])
    return stats


# -- the backend ------------------------------------------------------------------------------

SCORING_TEXT = {
    "padding": "vLLM engine (paged attention, its own scheduling): no padding; one "
               "LLM.generate call per batch (batching.*.layout)",
    "decoding": "greedy (vLLM, temperature 0) to max_new_tokens or EOS; then cut where the "
                "transformers path stops: at EOS, max_new_tokens, or once the parse is decided",
    "likelihood": "lm-eval loglikelihood from vLLM prompt_logprobs over context_enc + "
                  "continuation_enc; acc_norm = ll / option length in characters",
}


@register_backend("vllm")
class VLLMBackend(LocalBackend):
    name = "vllm"
    # The engine's GPU work leaves the host thread free: the next batch is planned there
    # (templates, tokenising, prompt trees: ~14 ms an item on a CPU core) while the engine
    # runs this one, as the transformers backend does; inline, the GPU waited through it.
    overlaps_host_work = True
    engine_attention = "chosen by vllm"
    invariance: dict | None = None  # configure_process's batch-invariant decision

    def configure_process(self, environ) -> dict:
        self.invariance = batch_invariance(environ)  # vLLM reads it once, at its import
        return super().configure_process(environ)

    def prepare(self, spec, device: str) -> list:
        check_backend(spec.quantize, device)  # installed, with a GPU: before anything loads
        return super().prepare(spec, device)

    def load(self, prepared, spec) -> tuple:
        return load_vllm(prepared, spec, self.invariance)

    def budget(self, spec, loaded, scorer):
        return scorer.token_budget(spec.batch_tokens, spec.batch_size)

    def scoring_text(self) -> dict:
        return dict(SCORING_TEXT)
