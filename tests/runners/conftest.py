"""Fixtures for runner tests; the tiny model builders live in tiny_models.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_models import make_model, make_tokenizer  # noqa: E402

# What a CPU run's backend sets before its first model call (TransformersBackend.load), so
# that tests building a Scorer or packing linears directly run in the same process setting.
from runners.backends.transformers import configure_device  # noqa: E402

configure_device("cpu", os.environ)


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory) -> Path:
    """A tiny llama saved as a model folder (what `run --model FOLDER` loads)."""
    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    tokenizer = make_tokenizer()
    make_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return make_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer):
    # One thread: tiny matrices gain nothing from more, and on a shared CPU two threads
    # spin-wait for each other (20x slower per matmul here under load).
    torch.set_num_threads(1)
    return make_model(tiny_tokenizer)
