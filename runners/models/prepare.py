"""A model spec prepared for a run without loading its weights: where the weights are and
their hash, the tokenizer, the prompt mode and template arguments, and the fingerprint the
store compares before any cell is written (so a refused run loads nothing and writes
nothing)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.harness.parser import PARSER_VERSION
from fragility_tui.harness.render import PROMPT_VERSION
from runners.models.fingerprint import (file_sha256, gguf_quant_type, prompt_mode, template_args,
                                 tokenizer_hash, weights_hash)
from runners.models.gguf_parse import parsing_gguf_once
from runners.models.load import (CACHE_FORMAT, ResolvedSpec, attention_implementation, cache_root,
                            pick_device, pick_dtype, refuse_remote_code, resolve_spec)



@dataclass
class PreparedModel:
    spec: str
    name: str  # the grid's model name (--name, or NAME / NAME+int4)
    base_model: str | None  # the unquantised build's name, for a quantised one
    resolved: ResolvedSpec
    device: str
    dtype: str  # fp32 | fp16 | bf16
    quantize: str | None
    prompt_mode: str  # chat | raw
    template_args: dict
    tokenizer: object
    weights_sha256: str
    gguf_quant: str | None
    fingerprint: dict
    refused: dict = field(default_factory=dict)  # config id -> why it is not run

    @property
    def refusal(self) -> str:
        """The one line that names the refused configs and says why."""
        return (f"{self.name}: configs {', '.join(sorted(self.refused))} refused (not run): "
                + "; ".join(sorted(set(self.refused.values()))) + "; the other configs run")

    def refuse_modifiers(self, configs) -> None:
        """The configs whose modifier this model cannot honour: +chat without a chat
        template, +bos with a tokenizer that defines no BOS token."""
        from fragility_tui.harness.configs import get_config

        tokenizer = self.tokenizer
        for config_id in configs:
            config = get_config(config_id)
            if config.template == "chat" and not isinstance(tokenizer.chat_template, str):
                self.refused[config_id] = "+chat needs a chat template and the model has none"
            elif config.bos == "on" and tokenizer.bos_token_id is None:
                self.refused[config_id] = "+bos needs a BOS token and the tokenizer defines none"


def converted_folder(gguf_sha: str) -> Path | None:
    """A folder the GGUF file was already converted into, in any dtype (the tokenizer is
    the same in each); None before the first conversion."""
    for folder in sorted((cache_root() / "models").glob(f"{CACHE_FORMAT}-{gguf_sha[:20]}-*")):
        if (folder / "CONVERTED").is_file():
            return folder
    return None


def _tokenizer(resolved: ResolvedSpec, weights_sha: str, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        if resolved.kind == "gguf":
            folder = converted_folder(weights_sha)
            if folder is not None:
                return AutoTokenizer.from_pretrained(folder)
            # Reads the tokenizer out of the GGUF metadata; no tensor is loaded.
            return AutoTokenizer.from_pretrained(resolved.path.parent,
                                                 gguf_file=resolved.path.name)
        return AutoTokenizer.from_pretrained(resolved.path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot load the tokenizer of {resolved.spec}: {exc}",
                         field="--model") from None


def _attention(resolved: ResolvedSpec, weights_sha: str, trust_remote_code: bool) -> str:
    """sdpa or eager, decided from the model's config (no weights read)."""
    from transformers import AutoConfig

    try:
        converted = converted_folder(weights_sha) if resolved.kind == "gguf" else None
        if converted is not None and (converted / "CONVERTED").is_file():
            config = AutoConfig.from_pretrained(converted)
        elif resolved.kind == "gguf":  # reads the GGUF's metadata, not its tensors
            config = AutoConfig.from_pretrained(resolved.path.parent,
                                                gguf_file=resolved.path.name)
        else:
            config = AutoConfig.from_pretrained(resolved.path,
                                                trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the config of {resolved.spec}: {exc}",
                         field="--model") from None
    return attention_implementation(config)


def adds_bos(tokenizer) -> bool:
    bos = tokenizer.bos_token_id
    ids = tokenizer("a")["input_ids"]
    return bos is not None and len(ids) > 0 and ids[0] == bos


@parsing_gguf_once
def prepare_model(spec: str, *, name: str | None = None, dtype: str = "auto",
                  device: str = "auto", quantize: str | None = None, max_new_tokens: int = 16,
                  mode: str = "auto", trust_remote_code: bool = False,
                  backend: str = "transformers",
                  engine_attention: str | None = None) -> PreparedModel:
    """`backend` is recorded in the fingerprint (another backend computes other numbers);
    `engine_attention`, where an engine chooses its attention, is recorded instead of the
    implementation transformers would pick."""
    resolved = resolve_spec(spec)
    device = pick_device(device)
    dtype_name, _ = pick_dtype(dtype, device)
    quant = None
    if resolved.kind == "gguf":
        weights_sha = file_sha256(resolved.path)
        quant = gguf_quant_type(resolved.path)
    else:
        if not trust_remote_code:
            refuse_remote_code(spec, resolved.path)
        weights_sha = weights_hash(resolved.path)
    tokenizer = _tokenizer(resolved, weights_sha, trust_remote_code)
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None
    chosen = prompt_mode(mode, template, [spec, resolved.name, resolved.path.name,
                                          resolved.source])
    args = template_args(template) if chosen == "chat" else {}
    bos = adds_bos(tokenizer)
    grid_name = name or (f"{resolved.name}+{quantize}" if quantize else resolved.name)
    fingerprint = {
        "weights_sha256": weights_sha, "revision": resolved.revision, "gguf_quant": quant,
        "dtype": dtype_name,
        "quantization": f"optimum-quanto q{quantize} weights" if quantize else None,
        # Another backend computes other numbers: its cells are another setting.
        "device_type": device.split(":")[0], "backend": backend,
        "attn_implementation": (engine_attention
                                or _attention(resolved, weights_sha, trust_remote_code)),
        "max_new_tokens": max_new_tokens,
        "parser_version": PARSER_VERSION, "prompt_version": PROMPT_VERSION,
        "prompt_mode": chosen,
        "chat_template_sha256": (hashlib.sha256(template.encode()).hexdigest()
                                 if chosen == "chat" else None),
        "template_args": args, "add_bos": bos,
        # A GGUF file holds its tokenizer, so its hash covers it (and the tokenizer read
        # from the file or from its converted folder hash alike).
        "tokenizer_sha256": None if resolved.kind == "gguf" else tokenizer_hash(tokenizer),
    }
    return PreparedModel(spec, grid_name, resolved.name if quantize else None, resolved,
                         device, dtype_name, quantize, chosen, args, tokenizer, weights_sha,
                         quant, fingerprint)


@parsing_gguf_once
def load_spec(spec: str, *, dtype: str = "auto", device: str = "auto",
              quantize: str | None = None, trust_remote_code: bool = False):
    """Prepare and load a model spec in one call (tests, benchmarks): a LoadedModel."""
    from runners.models.load import load_model

    prepared = prepare_model(spec, dtype=dtype, device=device, quantize=quantize,
                             trust_remote_code=trust_remote_code)
    return load_model(spec, prepared=prepared, quantize=quantize,
                      trust_remote_code=trust_remote_code)
