"""One parse of a GGUF file per process, where transformers would parse it again and again.

Loading a GGUF model the first time, transformers parses the whole file (its metadata and
the tokenizer's vocabulary, ~900k fields for SmolLM2's 49,152 tokens) once for each thing it
reads: the config (three times), the tokenizer (twice), the weights; our fingerprint reads
the file type too. Each parse took ~2 CPU-seconds, ~14 of the ~22 of SmolLM2's first load.
Inside `gguf_parsed_once()` each file is parsed once and the reader shared: a GGUFReader is
read-only (a memory map and the fields read when it was made). The readers are dropped when
the outermost block ends (their fields are ~100 MB of small objects for SmolLM2). The
tensor-name map transformers builds per submodule is shared the same way.
`load_spec` parses a GGUF file once; a run, which prepares its models before it loads them,
twice.
"""

from __future__ import annotations

import functools
import os
import threading
from contextlib import contextmanager

_lock = threading.RLock()  # one patched GGUFReader at a time, whatever thread loads


@contextmanager
def gguf_parsed_once():
    """Within the block `gguf.GGUFReader(path)` returns the reader already made for that
    file, where there is one. Without the gguf package (no GGUF file can be read) a no-op."""
    try:
        import gguf
    except ImportError:
        yield
        return
    with _lock:
        original = gguf.GGUFReader
        if getattr(original, "_parsed_once", False):  # nested: already in place
            yield
            return

        readers = {}

        def reader(path, mode="r"):
            key = (os.path.realpath(path), mode)
            if key not in readers:
                readers[key] = original(path, mode)
            return readers[key]

        reader._parsed_once = True
        name_map = gguf.get_tensor_name_map
        gguf.GGUFReader = reader
        # transformers builds the (read-only) tensor-name map again for every submodule of
        # the model while it maps the weights: 397 times for SmolLM2, ~4 s
        gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = original, name_map


def parsing_gguf_once(function):
    """`function` run inside gguf_parsed_once()."""

    @functools.wraps(function)
    def parsing_once(*args, **kwargs):
        with gguf_parsed_once():
            return function(*args, **kwargs)

    return parsing_once
