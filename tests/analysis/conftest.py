"""Fixtures for the analysis tests."""

from __future__ import annotations

import pytest
from analysis_grids import TINY, TINY_BENCHMARKS, make_cube

from fragility_tui.grid.cube import Cube


@pytest.fixture
def tiny() -> Cube:
    return make_cube(TINY, TINY_BENCHMARKS)
