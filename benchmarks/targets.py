"""The targets a benchmark checks (`make bench`): which were missed, the closing line and the
exit status (--strict makes a miss exit 1; wall times on a loaded machine vary)."""

from __future__ import annotations


class Targets:
    def __init__(self, hint: str = ""):
        self.missed: list[str] = []
        self.hint = hint  # what to look at when a figure is missed

    def check(self, name: str, ok: bool) -> bool:
        if not ok:
            self.missed.append(name)
        return ok

    def finish(self, strict: bool) -> int:
        if self.missed:
            print("missed: " + ", ".join(self.missed) + (f" ({self.hint})" if self.hint else ""))
        return 1 if self.missed and strict else 0
