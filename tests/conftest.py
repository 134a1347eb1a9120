"""Shared fixtures; the helpers themselves live in tests/helpers.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import require_shared_benchmarks, run_cli  # noqa: E402


@pytest.fixture
def shared_benchmarks() -> Path:
    return require_shared_benchmarks()


@pytest.fixture
def cli():
    return run_cli
