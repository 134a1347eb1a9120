"""Issue 47 item 5: reading a run's progress reads at most the tail of its events path, even
when the path names a device that never ends (/dev/zero reports a size of 0). Run in a
child process capped at 1 GiB of address space, so a reader without the bound fails fast
instead of taking the machine's memory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import REPO

CHILD = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from fragility_tui.processes import tail_progress
print(tail_progress("/dev/zero"))
"""


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_events_path_naming_dev_zero_is_read_in_bounded_memory():
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stderr[-500:]
