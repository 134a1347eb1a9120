"""The CLI run's live line (`--display full`): it fits one terminal row, a long model name
giving way before the counts and the ETA (at 100 columns it was cut to `ETA 0:01:0`, and a
longer line wraps, which the next redraw's carriage return cannot clear), and it says the
model is scoring before its first batch lands (tens of seconds on a CPU showed nothing)."""

from __future__ import annotations

import io
import os

from runners.run import events
from runners.run.events import Display

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct+int8-with-a-long-local-suffix"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def shown(monkeypatch, columns: int, *records, stream=None) -> list[str]:
    monkeypatch.setattr(events.shutil, "get_terminal_size",
                        lambda fallback=None: os.terminal_size((columns, 24)))
    stream = stream or Terminal()
    display = Display("full", stream=stream)
    for record in records:
        display.show(record)
    return [part.rstrip("\n") for part in stream.getvalue().split("\r\x1b[2K") if part]


def test_the_live_line_fits_the_terminal_and_keeps_the_eta(monkeypatch):
    batch = {"event": "batch", "run_id": "r", "model": MODEL, "cells_done": 650,
             "cells_total": 1560, "tokens_per_s": 812.4, "elapsed_s": 61, "eta_s": 65}
    for columns in (60, 80, 100, 200):
        (line,) = shown(monkeypatch, columns, batch)
        assert len(line) <= columns - 1, (columns, line)
        assert line.endswith("650/1560 cells  812 tok/s  elapsed 0:01:01  ETA 0:01:05"
                             if columns >= 100 else "650/1560 cells  ETA 0:01:05"
                             if columns < 70 else "650/1560 cells  812 tok/s  ETA 0:01:05")
    (wide,) = shown(monkeypatch, 200, batch)
    assert MODEL in wide
    (narrow,) = shown(monkeypatch, 100, batch)
    assert "HuggingFa…al-suffix" in narrow  # the middle of the name gives way
    (piped,) = shown(monkeypatch, 60, batch, stream=io.StringIO())  # not a terminal: whole
    assert MODEL in piped


def test_before_the_first_batch_the_line_says_the_model_is_scoring(monkeypatch):
    lines = shown(monkeypatch, 100,
                  {"event": "started", "run_id": "r", "grid": "g", "models": [MODEL],
                   "items": 60, "configs": ["o0.letter"], "cells_done": 104,
                   "cells_total": 1560},
                  {"event": "model_loaded", "run_id": "r", "model": "tiny", "load_s": 1.5,
                   "summary": "fp32 on cpu"})
    assert lines[-1] == ("[#...................] tiny  104/1560 cells  scoring its first "
                         "batch…")
    assert lines[-2].startswith("loaded tiny in 1.5 s")
