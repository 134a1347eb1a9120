"""Run progress: JSON-lines events (the TUI tails them) and the human display.

Event lines, one JSON object each, flushed as written; every line has `event`, `run_id`
and `time` (UTC ISO 8601):
- `started`: grid, models, items, configs, cells_total, cells_done (already in the store)
- `model_loaded`: model, load_s, provenance summary
- `batch`: model, cells_done, cells_total, batch_cells, tokens, tokens_per_s, elapsed_s, eta_s
- `finished` / `cancelled`: cells_done, cells_total, tokens, seconds
- `failed`: reason (the same one-line message the CLI prints)
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from fragility_tui import settings


def default_events_path(run_id: str) -> Path:
    return settings.data_dir() / "runs" / f"{run_id}.jsonl"


class EventLog:
    """Appends events to a file (append mode: a resumed run continues the same log)."""

    def __init__(self, path: Path, run_id: str):
        self.path = Path(path)
        self.run_id = run_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")

    def emit(self, event: str, **fields) -> dict:
        record = {"event": event, "run_id": self.run_id,
                  "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **fields}
        self._fh.write(json.dumps(record, default=str) + "\n")
        self._fh.flush()
        return record

    def close(self) -> None:
        self._fh.close()


def read_events(path: str | os.PathLike) -> list[dict]:
    """Every complete event line of a log (a half-written last line is skipped)."""
    events = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def choose_display(requested: str | None, stream=None) -> str:
    stream = stream or sys.stdout
    if requested:
        return requested
    return "full" if stream.isatty() else "plain"


class Display:
    """`full`: one live status line (redrawn at most once a second); `plain`: a line per
    event; `none`: silent. Model and grid names are printed literally (no markup)."""

    def __init__(self, mode: str, stream=None):
        self.mode = mode
        self.stream = stream or sys.stdout
        self._last_draw = 0.0

    def show(self, record: dict) -> None:
        if self.mode == "none":
            return
        kind = record["event"]
        if kind == "batch":
            line = _batch_line(record)
            if self.mode == "full":
                now = time.monotonic()
                if now - self._last_draw >= 1.0 or record["cells_done"] == record["cells_total"]:
                    self._last_draw = now
                    self.stream.write("\r\x1b[2K" + line)
                    self.stream.flush()
                return
            self._print(line)
            return
        if self.mode == "full":
            self.stream.write("\r\x1b[2K")
        self._print(_other_line(record))

    def _print(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = int(width * done / total) if total else width
    return "#" * filled + "." * (width - filled)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _batch_line(r: dict) -> str:
    return (f"[{_bar(r['cells_done'], r['cells_total'])}] {r['model']}  "
            f"{r['cells_done']}/{r['cells_total']} cells  {r['tokens_per_s']:.0f} tok/s  "
            f"elapsed {_duration(r['elapsed_s'])}  ETA {_duration(r.get('eta_s'))}")


def _other_line(r: dict) -> str:
    kind = r["event"]
    if kind == "started":
        return (f"run {r['run_id']}: grid {r['grid']}, {len(r['models'])} model(s), "
                f"{r['items']} items x {len(r['configs'])} configs; {r['cells_done']} of "
                f"{r['cells_total']} cells already done; events: {r.get('events_path', '')}")
    if kind == "model_loaded":
        return f"loaded {r['model']} in {r['load_s']:.1f} s ({r['summary']})"
    if kind in ("finished", "cancelled"):
        return (f"run {r['run_id']} {kind}: {r['cells_done']}/{r['cells_total']} cells, "
                f"{r['tokens']} tokens in {r['seconds']:.1f} s")
    if kind == "configs_refused":  # the reason line names the configs and why
        return r["reason"]
    if kind == "failed":
        return f"run {r['run_id']} failed: {r['reason']}"
    if kind == "probe_failed":
        why = r.get("error") or (f"largest difference {r.get('largest_difference'):.3g} over "
                                 f"the tolerance {r.get('tolerance'):.3g}")
        return (f"warning: {r['model']}: packed tree-mask scoring did not reproduce plain "
                f"forwards on the start-up probe ({why}); scoring one tree node per row "
                "(same results, more calls)")
    return json.dumps(r, default=str)
