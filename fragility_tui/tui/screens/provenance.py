"""Runs → a run's provenance card."""

from __future__ import annotations

import json

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from fragility_tui.provenance import provenance_card
from fragility_tui.store.runs import RunRecord
from fragility_tui.tui.sanitize import block, clean
from fragility_tui.tui.screens.base import DrillScreen


# ---------------------------------------------------------------- Runs → provenance
class ProvenanceScreen(DrillScreen):
    """A run's provenance card: everything a score must carry (SPEC §10)."""

    def __init__(self, run: RunRecord):
        super().__init__()
        self.run = run

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with VerticalScroll():
            yield Static("", id="provenance", markup=False)
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        run = self.run
        self.set_title(f"run {run.run_id}: provenance")
        text = Text()
        try:  # the card `runs show` prints: scoring first, in words and rounded figures
            text.append_text(block(provenance_card(run.to_dict())))
        except Exception as exc:  # a hand-edited or old record: the raw fields still show
            text.append(f"(no card: {type(exc).__name__}: {exc})", style="yellow")
        text.append("\n\nthe raw record\n", style="bold underline")
        for label, value in (("run_id", run.run_id), ("grid", run.grid), ("model", run.model),
                             ("status", run.status), ("pid", run.pid),
                             ("created_at", run.created_at), ("started_at", run.started_at),
                             ("ended_at", run.ended_at), ("cells_done", run.cells_done),
                             ("cells_total", run.cells_total), ("tokens", run.tokens),
                             ("seconds", run.seconds), ("events_path", run.events_path),
                             ("error", run.error)):
            if value is not None:
                text.append(f"{label:<12} ", style="bold")
                text.append(clean(value, one_line=True, limit=2000) + "\n")
        for label, doc in (("spec", run.spec), ("provenance", run.provenance)):
            text.append(f"\n{label}\n", style="bold underline")
            dumped = json.dumps(doc or {}, indent=2, sort_keys=True, default=str)
            text.append_text(block(dumped))
            text.append("\n")
        self.query_one("#provenance", Static).update(text)
