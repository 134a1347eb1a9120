"""Runs → a run's provenance card."""

from __future__ import annotations

import json

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from fragility_tui.provenance import provenance_card
from fragility_tui.tui.sanitize import block, clean


from fragility_tui.tui.screens.base import DrillScreen


# ---------------------------------------------------------------- Runs → provenance
class ProvenanceScreen(DrillScreen):
    """A run's provenance card: everything a score must carry (SPEC §10)."""

    def __init__(self, run: dict):
        super().__init__()
        self.run = run

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with VerticalScroll():
            yield Static("", id="provenance", markup=False)
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.set_title(f"run {self.run.get('run_id')}: provenance")
        text = Text()
        try:  # the card `runs show` prints: scoring first, in words and rounded figures
            text.append_text(block(provenance_card(self.run)))
        except Exception as exc:  # a hand-edited or old record: the raw fields still show
            text.append(f"(no card: {type(exc).__name__}: {exc})", style="yellow")
        text.append("\n\nthe raw record\n", style="bold underline")
        for key in ("run_id", "grid", "model", "status", "pid", "created_at", "started_at",
                    "ended_at", "cells_done", "cells_total", "tokens", "seconds", "events_path",
                    "error"):
            if self.run.get(key) is not None:
                text.append(f"{key:<12} ", style="bold")
                text.append(clean(self.run[key], one_line=True, limit=2000) + "\n")
        for key in ("spec", "provenance"):
            text.append(f"\n{key}\n", style="bold underline")
            dumped = json.dumps(self.run.get(key) or {}, indent=2, sort_keys=True, default=str)
            text.append_text(block(dumped))
            text.append("\n")
        self.query_one("#provenance", Static).update(text)
