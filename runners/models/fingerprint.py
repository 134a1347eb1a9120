"""What identifies a model's cells, computed before any weights load (issue 12).

- file hashes, cached by (path, size, mtime) so a large model is hashed once, not per run;
- a GGUF file's quantisation type (its metadata via `gguf`, else its file name);
- the prompt mode rule (chat only for an instruct model) and the chat template's pinned
  arguments (`enable_thinking=False`, a fixed date), so a render never depends on today;
- the fingerprint dict that the store compares (fragility_tui.store.models).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from fragility_tui import settings
from fragility_tui.errors import InputError
from fragility_tui.files import write_text_atomic
from fragility_tui.harness.chat import TEMPLATE_DATE  # what `strftime_now`, `date_string` see
from fragility_tui.hashing import sha256_file

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
PROMPT_MODES = ("auto", "chat", "raw")
_INSTRUCT = re.compile(r"instruct|chat|(?:^|[-_.\s/])it(?:$|[-_.\s@])", re.IGNORECASE)
_GGUF_QUANT = re.compile(r"(?:^|[-_.])((?:I?Q\d(?:_[A-Z0-9]+)*)|BF16|F16|F32)(?:$|[-_.])",
                         re.IGNORECASE)


def cache_root() -> Path:
    return settings.cache_dir()


# -- hashes, cached -------------------------------------------------------------------------

def _cached(path: Path, kind: str, compute):
    """compute(path), remembered in the cache keyed by (kind, path, size, mtime)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = f"{kind}:{path}"
    stamp = [stat.st_size, stat.st_mtime_ns]
    index = cache_root() / "file-digests.json"
    try:
        known = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    entry = known.get(key)
    if isinstance(entry, dict) and entry.get("stamp") == stamp:
        return entry["value"]
    value = compute(path)
    known[key] = {"stamp": stamp, "value": value}
    try:  # best effort: a read-only cache only costs a recomputation
        write_text_atomic(index, json.dumps(known, sort_keys=True))
    except OSError:
        pass
    return value


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes. A hub-cache snapshot file links to a blob named by its
    sha256 (the Git LFS object id): that name is the hash, nothing to read."""
    path = Path(path)
    if path.is_symlink():
        target = Path(os.readlink(path)).name
        if re.fullmatch(r"[0-9a-f]{64}", target) and path.parent.parent.name == "snapshots":
            return target
    return _cached(path, "sha256", sha256_file)


def weights_hash(folder: Path) -> str:
    """sha256 over (file name, sha256) of every weight file in a folder, sorted by name."""
    h = hashlib.sha256()
    files = sorted(p for p in Path(folder).iterdir()
                   if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    for p in files:
        h.update(f"{p.name}\0{file_sha256(p)}\n".encode())
    return h.hexdigest()


def tokenizer_hash(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        text = backend.to_str()
    else:
        text = json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(text.encode()).hexdigest()


def gguf_quant_type(path: Path) -> str | None:
    """The GGUF file's quantisation (e.g. Q4_1, Q4_K_M): `general.file_type` from its
    metadata when the `gguf` package is installed, else read off the file name."""
    return _cached(path, "gguf-quant", _gguf_quant_type)


def _gguf_quant_type(path: Path) -> str | None:
    try:
        from gguf import GGUFReader, LlamaFileType

        field = GGUFReader(str(path)).fields.get("general.file_type")
        if field is not None:
            name = LlamaFileType(int(field.parts[field.data[0]][0])).name
            return name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except Exception:  # no gguf package, or metadata it cannot read: the file name
        pass
    match = _GGUF_QUANT.search(Path(path).stem)
    return match.group(1).upper() if match else None


# -- prompts ----------------------------------------------------------------------------------

def looks_instruct(*names: str | None) -> bool:
    """Whether a model's name marks it instruct-tuned: "instruct", "chat" or "-it"."""
    return any(_INSTRUCT.search(n) for n in names if n)


def prompt_mode(requested: str, template: str | None, names: list[str | None]) -> str:
    """chat | raw. auto: chat only for an instruct model (a chat template AND a name that
    marks it instruct); a base model reads raw prompts even when it ships a template."""
    if requested not in PROMPT_MODES:
        raise InputError(f"unknown prompt mode {requested!r}; use auto, chat or raw",
                         field="--prompt-mode")
    if requested == "chat" and not template:
        raise InputError("--prompt-mode chat needs a chat template; this model's tokenizer "
                         "has none", field="--prompt-mode")
    if requested != "auto":
        return requested
    return "chat" if template and looks_instruct(*names) else "raw"


def template_args(template: str | None) -> dict:
    """The arguments pinned for a chat template, recorded with the model: thinking off
    where the template reads `enable_thinking`; a fixed date where it reads the date."""
    args = {}
    if not template:
        return args
    if "enable_thinking" in template:
        args["enable_thinking"] = False
    if "strftime_now" in template or "date_string" in template:
        args["date_string"] = TEMPLATE_DATE.strftime("%d %b %Y")
    return args


_PINNING = threading.RLock()


@contextmanager
def pinned_date():
    """transformers' `strftime_now` reads `datetime.now()`: pin it to TEMPLATE_DATE while a
    template renders. The pin swaps a module global, so renders take a lock: during a run
    they happen on the host worker (runners.run.host_work), but a second thread rendering at
    the same moment must neither see the real date nor restore it under the other."""
    from transformers.utils import chat_template_utils as ctu

    class _Fixed(datetime):
        @classmethod
        def now(cls, tz=None):
            return TEMPLATE_DATE if tz is None else TEMPLATE_DATE.replace(tzinfo=tz)

    with _PINNING:
        original = ctu.datetime
        ctu.datetime = _Fixed
        try:
            yield
        finally:
            ctu.datetime = original


def prompt_sha(token_lists: list[list[int]]) -> str:
    """sha256 of a cell's prompt token ids (a likelihood cell: its four sequences)."""
    text = ";".join(",".join(map(str, tokens)) for tokens in token_lists)
    return hashlib.sha256(text.encode()).hexdigest()
