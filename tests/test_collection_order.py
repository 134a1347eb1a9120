"""Tests marked `long` are collected first (tests/conftest.py), so `make test`'s workers start
them early instead of one worker running them alone at the end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[1]


def test_long_tests_are_collected_before_the_rest():
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider",
                           "tests/analysis/test_binomial.py", "tests/runners/test_smollm2.py"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert ids[0] == ("tests/runners/test_smollm2.py::"
                      "test_runner_matches_the_plain_reference_on_40_real_items"), ids[:3]
    assert ids[1].startswith("tests/analysis/test_binomial.py")  # the rest keep their order
