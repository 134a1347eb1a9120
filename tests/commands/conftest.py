"""Fixtures of the command tests."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="module")
def shipped_db(tmp_path_factory, samples_template):
    """The shipped grids as `load-samples` leaves them (tests/conftest.py), one copy per test
    module (comparisons a module records stay in its copy)."""
    db = tmp_path_factory.mktemp("shipped") / "s.duckdb"
    shutil.copyfile(samples_template, db)
    return db
