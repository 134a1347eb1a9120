"""Run progress: JSON-lines events (the TUI tails them) and the human display.

Event lines, one JSON object each, flushed as written; their layout is the versioned schema
of fragility_tui/schemas/events.py (every line has `event`, `run_id`, `time` in UTC ISO
8601 and `schema`; the fields of each kind are declared there), which the display and the
app read them through:
- `started`: grid, models, items, configs, cells_total, cells_done (already in the store)
- `model_loaded`: model, load_s, provenance summary, reused (weights kept loaded from an
  earlier run of the same process: a comparison's chunks)
- `batch`: model, cells_done, cells_total, batch_cells, tokens, tokens_per_s, elapsed_s, eta_s
- `finished` / `cancelled`: cells_done, cells_total, tokens, seconds
- `failed`: reason (the same one-line message the CLI prints)
- `request_retry`: model, request, attempt, attempts, delay_s, reason (a served model's
  request waits to be retried); `request_recovered`: model, request, attempt (it was
  answered). Written from the requests' worker threads: a lock keeps lines whole.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from fragility_tui import settings
from fragility_tui.text import clean
from fragility_tui.schemas.events import (EVENT_SCHEMA, Batch, ConfigsRefused, Ended, Failed,
                                          ModelLoaded, ProbeFailed, RequestRecovered,
                                          Queued, RequestRetry, Started, TakenOver,
                                          read_event)


def default_events_path(run_id: str) -> Path:
    return settings.data_dir() / "runs" / f"{run_id}.jsonl"


class EventLog:
    """Appends events to a file (append mode: a resumed run continues the same log)."""

    def __init__(self, path: Path, run_id: str):
        self.path = Path(path)
        self.run_id = run_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()  # a served model's retries are told from its workers

    def emit(self, event: str, **fields) -> dict:
        record = {"event": event, "run_id": self.run_id,
                  "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "schema": EVENT_SCHEMA, **fields}
        read_event(record)  # a field of the wrong type fails here, not in a reader
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            self._fh.write(line)
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
    event; `none`: silent. Model and grid names are printed literally (no markup), through
    fragility_tui.text.clean: an escape sequence in a name shows, it does not act.

    While a served model's request waits to be retried, the live line says so ("retrying
    item q3, config o0.letter in 2.0 s: server said HTTP 503: busy (attempt 2 of 6)"); once
    it is answered (or the batch is committed) the progress line returns. `plain` prints a
    line for each retry and each answer after one."""

    def __init__(self, mode: str, stream=None):
        self.mode = mode
        self.stream = stream or sys.stdout
        self._last_draw = 0.0
        self._lock = threading.Lock()  # retries are told from the requests' threads
        self._progress = ""  # the live line's progress, as last drawn
        self._retrying: dict[str, str] = {}  # request -> its retry line, while it waits
        self._cells = (0, 0)  # the run's cells done and in all, as last told

    def show(self, record: dict) -> None:
        """Show one event as emitted (a line of the log)."""
        if self.mode == "none":
            return
        event = read_event(record)
        with self._lock:
            if isinstance(event, (RequestRetry, RequestRecovered)):
                self._show_retry(event)
            elif isinstance(event, Batch):
                self._show_batch(event)
            else:
                self._retrying.clear()  # a run that moves on waits on no request
                if self.mode == "full":
                    self.stream.write("\r\x1b[2K")
                self._print(_other_line(record))
                self._between_batches(event)

    def _between_batches(self, event) -> None:
        """The live line until the first batch is committed (on a CPU, tens of seconds):
        the run's cells so far and that the model is scoring."""
        if isinstance(event, Started):
            self._cells = (event.cells_done or 0, event.cells_total or 0)
        elif isinstance(event, ModelLoaded) and self.mode == "full":
            done, total = self._cells
            self._progress = (f"[{_bar(done, total)}] {event.model}  {done}/{total} cells  "
                              "scoring its first batch…")
            self._draw(self._progress)

    def _show_batch(self, event: Batch) -> None:
        self._cells = (event.cells_done, event.cells_total)
        line = _batch_line(event, self._width() if self.mode == "full" else None)
        retried = bool(self._retrying)
        self._retrying.clear()  # the batch's requests were all answered
        if self.mode != "full":
            self._print(line)
            return
        self._progress = line
        now = time.monotonic()
        if retried or now - self._last_draw >= 1.0 or event.cells_done == event.cells_total:
            self._last_draw = now
            self._draw(line)

    def _show_retry(self, event) -> None:
        if isinstance(event, RequestRetry):
            self._retrying[event.request] = event.line
            shown = event.line
        else:
            was = self._retrying.pop(event.request, None)
            if self.mode != "full":
                self._print(event.line)
                return
            if was is None:
                return  # the line did not say it was retrying
            # another request still waiting, or the progress line back
            shown = next(reversed(self._retrying.values()), self._progress)
        if self.mode == "full":
            self._draw(shown)
        else:
            self._print(shown)

    def _width(self) -> int | None:
        """The live line's room on a terminal: its columns less one (no wrap at the last);
        None when the stream is not a terminal (a file or a pipe gets the whole line)."""
        isatty = getattr(self.stream, "isatty", None)
        if not (isatty and isatty()):
            return None
        return shutil.get_terminal_size((100, 24)).columns - 1

    def _draw(self, line: str) -> None:
        # one terminal row: a longer line wraps, and the next redraw's \r clears only its
        # last row (at 100 columns it showed "ETA 0:01:0")
        width = self._width()
        line = clean(line, one_line=True)
        if width is not None and len(line) > width:
            line = line[:max(width - 1, 0)] + "…"
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()

    def _print(self, line: str) -> None:
        # Names, reasons and notes are untrusted (a grid named with escape sequences).
        self.stream.write(clean(line, one_line=True) + "\n")
        self.stream.flush()


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = int(width * done / total) if total else width
    return "#" * filled + "." * (width - filled)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _batch_line(b: Batch, width: int | None = None) -> str:
    """The progress line; within `width` the model's name gives way (its middle elided)
    before the counts and the ETA do."""
    model = clean(str(b.model), one_line=True)
    cells, eta = f"  {b.cells_done}/{b.cells_total} cells", f"  ETA {_duration(b.eta_s)}"
    speed, elapsed = f"  {b.tokens_per_s:.0f} tok/s", f"  elapsed {_duration(b.elapsed_s)}"
    bar = f"[{_bar(b.cells_done, b.cells_total)}] "
    rest = cells + speed + elapsed + eta
    for rest in (rest, cells + speed + eta, cells + eta):  # the narrower, the fewer
        if width is None or len(bar) + 9 + len(rest) <= width:
            break
    room = None if width is None else max(width - len(bar) - len(rest), 5)
    if room is not None and len(model) > room:
        model = model[:(room - 1) // 2] + "…" + model[len(model) - (room - 1 - (room - 1) // 2):]
    return bar + model + rest


def _other_line(record: dict) -> str:
    """The line of an event other than a batch; one this display does not describe is
    printed as its JSON."""
    e = read_event(record)
    if isinstance(e, Started):
        return (f"run {e.run_id}: grid {e.grid}, {len(e.models)} model(s), "
                f"{e.items} items x {len(e.configs)} configs; {e.cells_done} of "
                f"{e.cells_total} cells already done; events: {e.events_path or ''}")
    if isinstance(e, ModelLoaded):
        if e.reused:
            return f"{e.model} still loaded from an earlier run of this process ({e.summary})"
        return f"loaded {e.model} in {e.load_s:.1f} s ({e.summary})"
    if isinstance(e, Ended):
        return (f"run {e.run_id} {e.event}: {e.cells_done}/{e.cells_total} cells, "
                f"{e.tokens} tokens in {e.seconds:.1f} s")
    if isinstance(e, (TakenOver, Queued)):
        return f"run {e.run_id}: queued: {e.message}" if isinstance(e, Queued) else e.message
    if isinstance(e, ConfigsRefused):  # the reason line names the configs and why
        return e.reason
    if isinstance(e, Failed):
        return f"run {e.run_id} failed: {e.reason}"
    if isinstance(e, ProbeFailed):
        why = e.error or (f"largest difference {e.largest_difference:.3g} over "
                          f"the tolerance {e.tolerance:.3g}")
        return (f"warning: {e.model}: packed tree-mask scoring did not reproduce plain "
                f"forwards on the start-up probe ({why}); scoring one tree node per row "
                "(same results, more calls)")
    return json.dumps(record, default=str)
