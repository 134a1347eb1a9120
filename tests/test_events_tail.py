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


def test_a_nan_or_deeply_nested_events_line_is_skipped_not_fatal(tmp_path):
    """Issue 57 item 1: `"eta_s": NaN` once crashed the app's Runs pane (int(nan)), and a
    line nested past the parser's depth blanked the whole table: each is one bad line,
    skipped, and the last good progress shows."""
    import json

    from fragility_tui.processes import tail_progress
    from fragility_tui.tui.panes.runs import fmt_eta

    good = {"event": "batch", "cells_done": 5, "cells_total": 10, "eta_s": 12.0}
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(good) + "\n"
                    + '{"event": "batch", "cells_done": 6, "cells_total": 10, "eta_s": NaN}\n'
                    + "[" * 20_000 + "]" * 20_000 + "\n")
    progress = tail_progress(str(path))
    assert progress is not None and progress.cells_done == 5 and progress.eta_s == 12.0
    assert fmt_eta(float("nan")) == fmt_eta(float("inf")) == "—"
