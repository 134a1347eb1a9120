"""The run provenance (SPEC §10) as typed records: what the runner records in the runs table's
`provenance` column (runners/models/provenance.py builds it, runners/run/loop.py adds the
per-model records, batching and sessions) and what the disclosure card, the store and the
exports read.

Schema 1 is every provenance recorded so far: the runner stamps `"schema": 1`; those
recorded before it did carry no `schema` key and read as 1. Fields follow
fields.py's rules: an older run lacks many of them (None, or empty: the card says "not
recorded"), a newer one may carry more (kept in `extra`). The stored JSON itself is never
rewritten: `runs show --json` and the exports print it as recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from fragility_tui.schemas.fields import (as_list, as_object, as_version, list_of,
                                          mapping_of, object_or_none, read_record)

PROVENANCE_SCHEMA = 1


@dataclass(frozen=True)
class CodeVersion:
    """fragility-tui's version and the git commit a run ran from (`-dirty`: uncommitted)."""

    version: Any = None
    git: str | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, value, where: str = "fragility_tui") -> "CodeVersion":
        return read_record(cls, value, where)


@dataclass(frozen=True)
class ItemsPerBatch:
    min: Any = None
    max: Any = None
    mean: Any = None
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Batching:
    """The effective batching of one model: per run (`batching.<model>`) or per session."""

    token_budget: Any = None
    source: Any = None
    item_cap: Any = None
    oom_retries: Any = None
    failed_budget: Any = None
    batches: Any = None
    budgets_used: Any = None  # {budget: batches}
    items_per_batch: ItemsPerBatch = ItemsPerBatch()
    layout: Any = None  # how the scorer lays out rows
    tokens: Any = None  # tokens computed against those the prompt trees hold
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, value, where: str = "batching") -> "Batching":
        return read_record(cls, value, where, {"items_per_batch": _items_per_batch})


def _items_per_batch(value, where: str) -> ItemsPerBatch:
    return read_record(ItemsPerBatch, value, where)


@dataclass(frozen=True)
class Gpu:
    """What a CUDA session ran on."""

    name: Any = None
    count: Any = None
    index: Any = None
    capability: Any = None
    cuda: Any = None
    driver: Any = None
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Session:
    """One process's share of a run (the first, and each `--resume`)."""

    started_at: Any = None
    ended_at: Any = None
    resumed: bool | None = None
    status: Any = None
    cells_written: Any = None
    host: Any = None
    python: Any = None
    device: Any = None
    libraries: dict = field(default_factory=dict)
    fragility_tui: CodeVersion | None = None
    gpu: Gpu | None = None
    attn_implementation: dict = field(default_factory=dict)  # model -> implementation
    batching: dict = field(default_factory=dict)  # model -> Batching
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, value, where: str = "session") -> "Session":
        return read_record(cls, value, where, {
            "libraries": as_object, "fragility_tui": object_or_none(CodeVersion.from_json),
            "gpu": object_or_none(lambda v, w: read_record(Gpu, v, w)),
            "attn_implementation": as_object, "batching": mapping_of(Batching.from_json)})


@dataclass(frozen=True)
class Gguf:
    file: Any = None
    quant_type: Any = None
    compute: Any = None  # how its weights were computed with, in words
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Quantization:
    weights: Any = None  # qint8, qint4
    library: Any = None
    version: Any = None
    activations: Any = None
    execution: Any = None  # how the quantised weights were executed, in words
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Backend:
    name: Any = None
    version: Any = None
    status: Any = None  # e.g. experimental
    engine: Any = None  # vLLM: the engine's settings
    memory_sizing: Any = None  # vLLM
    batch_invariant: Any = None  # vLLM
    endpoint: Any = None  # openai: completions or chat
    system_fingerprint: Any = None  # openai
    api_key: Any = None  # openai: "sent" or "none", never the key
    extra: dict = field(default_factory=dict)


def _backend(value, where: str) -> Backend | None:
    # Runs before the per-model backend was recorded have none; anything but an object
    # there is read as none too (the card shows no backend line), not as an error.
    return read_record(Backend, value, where) if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class ModelProvenance:
    """The per-model record: a run's `models.<name>` and the model row's provenance."""

    spec: Any = None  # as given; a local path by its name only
    source: Any = None  # alias:..., gguf:FILE, folder:NAME, hub:ID, openai
    kind: Any = None
    revision: Any = None
    hub_download_bytes: Any = None
    weights_sha256: Any = None
    gguf: Gguf | None = None
    dtype: Any = None
    quantization: Quantization | None = None
    base_model: Any = None
    tokenizer_sha256: Any = None
    chat_template_sha256: Any = None
    chat_template: Any = None
    chat_template_tokens: Any = None
    prompt_mode: Any = None
    template_args: Any = None
    add_bos: Any = None
    eos_ids: Any = None
    device: Any = None
    device_map: Any = None  # set when sharded across GPUs
    attn_implementation: Any = None
    backend: Backend | None = None
    libraries: dict = field(default_factory=dict)
    fingerprint: Any = None
    max_new_tokens: Any = None
    numerics: dict = field(default_factory=dict)
    cpu_linear: Any = None  # which fp32 linear kernel ran on a CPU
    sdpa_kernels: Any = None  # the SDPA backends enabled on a GPU (None on a CPU)
    # --backend openai: what served the model, and the configs it refused with the reason
    served_model: Any = None
    endpoint_host: Any = None
    endpoint: Any = None
    template: Any = None
    concurrency: Any = None
    refused_configs: dict = field(default_factory=dict)
    echo_probe: Any = None  # the echo-vs-generation comparisons behind a refusal
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, value, where: str = "model") -> "ModelProvenance":
        return read_record(cls, value, where, {
            "gguf": object_or_none(lambda v, w: read_record(Gguf, v, w)),
            "quantization": object_or_none(lambda v, w: read_record(Quantization, v, w)),
            "backend": _backend, "libraries": as_object, "numerics": as_object,
            "refused_configs": as_object})


@dataclass(frozen=True)
class LoadReport:
    """How the items were loaded: a folder's files (with the split each name says) and
    warnings."""

    source: Any = None
    read: Any = None
    kept: Any = None
    excluded: dict = field(default_factory=dict)  # reason -> items
    per_benchmark: dict = field(default_factory=dict)
    trimmed: Any = None
    selected: Any = None
    files: tuple = ()
    warnings: tuple = ()
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RunProvenance:
    """A run's `provenance` column."""

    schema: int = PROVENANCE_SCHEMA
    spec_version: Any = None
    parser_version: Any = None
    prompt_version: Any = None
    max_new_tokens: Any = None
    seed: Any = None
    item_set_hash: Any = None
    items: Any = None  # how many
    per_benchmark: Any = None  # None: every item of each benchmark
    item_sources: tuple = ()
    load_report: LoadReport = LoadReport()
    configs: tuple = ()
    config_axes: Any = None  # the axes the configs vary, in words (issue 56)
    batch_size: Any = None
    batch_tokens: Any = None
    threads: Any = None
    prefix_reuse: Any = None
    overlap: Any = None
    prompt_mode: Any = None
    backend: Any = None  # the run's --backend, a name
    padding: Any = None  # how the backend pads, decodes and scores, in words
    decoding: Any = None
    likelihood: Any = None
    host: Any = None
    python: Any = None
    fragility_tui: CodeVersion | None = None
    libraries: dict = field(default_factory=dict)
    device: Any = None
    cuda_allocator: Any = None  # what the backend set before the first device use
    started_at: Any = None
    ended_at: Any = None
    tokens: Any = None
    seconds: Any = None
    models: dict = field(default_factory=dict)  # name -> ModelProvenance
    batching: dict = field(default_factory=dict)  # name -> Batching
    sessions: tuple = ()  # Session, oldest first
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, value, where: str = "provenance") -> "RunProvenance":
        return read_record(cls, value, where, {
            "schema": as_version, "item_sources": as_list, "configs": as_list,
            "load_report": lambda v, w: read_record(LoadReport, v, w, {
                "excluded": as_object, "per_benchmark": as_object, "files": as_list,
                "warnings": as_list}),
            "fragility_tui": object_or_none(CodeVersion.from_json), "libraries": as_object,
            "models": mapping_of(ModelProvenance.from_json),
            "batching": mapping_of(Batching.from_json),
            "sessions": list_of(Session.from_json)})


@dataclass(frozen=True)
class RecordedSpec:
    """What the card falls back to in a run's `spec` when its provenance lacks it (a run
    that failed before its provenance was written)."""

    configs: tuple = ()
    max_new_tokens: Any = None
    items: tuple = ()  # item paths as typed
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRun:
    """A run's row (store/runs.py's RunRecord, or its `to_dict()` as the runs JSON and the
    provenance export carry it) with its spec and provenance typed: what the card reads."""

    run_id: Any = None
    status: Any = None
    grid: Any = None
    error: Any = None
    started_at: Any = None
    ended_at: Any = None
    cells_done: Any = None
    cells_total: Any = None
    tokens: Any = None
    seconds: Any = None
    events_path: Any = None
    spec: RecordedSpec = RecordedSpec()
    provenance: RunProvenance = RunProvenance()
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping, where: str = "run") -> "RecordedRun":
        return read_record(cls, row, where, {
            "spec": lambda v, w: read_record(RecordedSpec, v, w, {
                "configs": as_list, "items": as_list}),
            "provenance": RunProvenance.from_json})
