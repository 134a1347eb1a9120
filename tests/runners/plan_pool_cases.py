"""Encoders the planning processes of test_plan_pool.py are given (importable by the
spawned processes, which get the test process's sys.path)."""

from __future__ import annotations

import os

from runners.plan.item_requests import Encoder


class DyingEncoder(Encoder):
    """An encoder whose process dies (as a killed or out-of-memory one does) when it
    tokenises a prompt of the question `dies_on`."""

    dies_on: str = ""

    def generation(self, prompt, **kwargs):
        if self.dies_on and self.dies_on in prompt.text:
            os._exit(9)
        return super().generation(prompt, **kwargs)
