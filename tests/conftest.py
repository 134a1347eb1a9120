"""Shared fixtures; the helpers themselves live in tests/helpers.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import require_shared_benchmarks, run_cli  # noqa: E402

# `make test` runs two workers on two cores. torch's OpenMP threads spin while they wait, so
# a 2-thread forward whose second core is taken by the other worker ran 4.4x slower than
# alone; passive waiting brings it to a 1-thread forward's speed (a scratch probe, 2026-12-04).
# Set before torch loads, in this process and every process a test starts.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture
def shared_benchmarks() -> Path:
    return require_shared_benchmarks()


@pytest.fixture
def cli():
    return run_cli
