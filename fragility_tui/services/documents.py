"""How an exported document reaches disk: Markdown table cells and atomic writes (shared by
exports.py and provenance_export.py)."""

from __future__ import annotations

import json
from pathlib import Path


def write_atomic(out: str | Path, text: str) -> None:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)


def md_escape(value) -> str:
    """A Markdown table cell: pipes escaped, line breaks as <br>, None empty."""
    if value is None:
        return ""
    text = json.dumps(value) if isinstance(value, list) else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")
