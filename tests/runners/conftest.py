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
def whole(tiny_folder, tmp_path_factory):
    """(items, cells) of the single-process grid the Ray launches are compared with
    (test_ray_nodes.py): 8 items under test_ray_launch's configs (common_args), run
    once per test process (it was once per module)."""
    from helpers import run_cli
    from test_ray_launch import common_args
    from test_run_loop import cells_of, write_items

    from fragility_tui.store.store import Store

    tmp = tmp_path_factory.mktemp("ray")
    items = write_items(tmp / "items.jsonl", 8)
    db = tmp / "whole.duckdb"
    run_cli("run", *common_args(tiny_folder, items), db=db, timeout=300, check=True)
    return items, cells_of(Store(db), "g")


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return make_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer):
    # One thread: tiny matrices gain nothing from more, and on a shared CPU two threads
    # spin-wait for each other (20x slower per matmul here under load).
    torch.set_num_threads(1)
    return make_model(tiny_tokenizer)
