"""How an exported document reaches disk: Markdown table cells and atomic writes (shared by
exports.py and provenance_export.py)."""

from __future__ import annotations

import json
from pathlib import Path

from fragility_tui.files import write_output


def write_document(out: str | Path, text: str) -> None:
    """An exported text document (UTF-8) at the path the user named (files.write_output)."""
    write_output(out, lambda fh: fh.write(text.encode("utf-8")))


def md_escape(value) -> str:
    """A Markdown table cell: pipes escaped, line breaks as <br>, None empty."""
    if value is None:
        return ""
    text = json.dumps(value) if isinstance(value, list) else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")
