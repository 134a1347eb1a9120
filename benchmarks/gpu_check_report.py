"""The GPU check's table: rows of (section, check, value, verdict), printed as they come and
written to the folder `--out` names as `gpu-check.json` and `gpu-check.md`.

Verdicts: `ok`, `FAIL` (the check failed: exit status 1), `WARN` (worth a look, not a
failure), `SKIP` (not run here, with the reason), or empty (a figure)."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

VERDICTS = ("", "ok", "FAIL", "WARN", "SKIP")


class Report:
    def __init__(self, device: str, out: Path | None = None, deadline_s: float | None = None,
                 only: set | None = None):
        self.device = device
        self.out = out  # rewritten after every section: a job cut short still brings back rows
        self.deadline_s = deadline_s  # past it, the remaining sections are SKIP rows
        self.only = only  # sections to run (None: all); the others are left out of the table
        self.rows: list[dict] = []
        self.figures: dict = {}  # numbers a later run compares with (JSON only)
        self.started = time.time()
        self.section = ""

    def row(self, check: str, value, verdict: str = "") -> None:
        assert verdict in VERDICTS, verdict
        self.rows.append({"section": self.section, "check": check, "value": str(value),
                          "verdict": verdict})
        print(f"  {check}: {value} {verdict}".rstrip(), flush=True)

    def guarded(self, section: str, function, *args, **kwargs):
        """Run one section; an exception becomes a FAIL row naming it, and the check goes
        on to the next section (one broken build must not hide the rest of the table)."""
        if self.only is not None and section not in self.only:
            return None
        self.section = section
        print(f"== {section}", flush=True)
        elapsed = time.time() - self.started
        if self.deadline_s is not None and elapsed > self.deadline_s:
            self.row(f"{section} not run", f"{elapsed:.0f} s gone, past --deadline "
                     f"{self.deadline_s:.0f} s", "SKIP")
            if self.out is not None:
                self.write(self.out)
            return None
        started = time.perf_counter()
        try:
            return function(self, *args, **kwargs)
        except Exception as exc:  # reported, not raised: the table is the product
            import traceback

            traceback.print_exc()
            self.row(f"{section} aborted", f"{type(exc).__name__}: {str(exc)[:300]}", "FAIL")
            return None
        finally:
            seconds = self.figures.setdefault("section_seconds", {})
            seconds[section] = round(time.perf_counter() - started, 1)
            if self.out is not None:
                self.write(self.out)

    @property
    def failed(self) -> list[str]:
        return [f"{r['section']}: {r['check']}" for r in self.rows if r["verdict"] == "FAIL"]

    def markdown(self) -> str:
        lines = [f"# gpu-check on {self.device}", "",
                 f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(self.started))}, "
                 f"{platform.node() or 'unknown host'}, "
                 f"{time.time() - self.started:.0f} s", "",
                 "| section | check | value | verdict |", "|---|---|---|---|"]
        for r in self.rows:
            value = r["value"].replace("|", "\\|")
            lines.append(f"| {r['section']} | {r['check']} | {value} | {r['verdict']} |")
        lines += ["", "FAILED: " + "; ".join(self.failed) if self.failed else "passed"]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        document = {"device": self.device, "started_utc": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": round(time.time() - self.started, 1), "passed": not self.failed,
            "failed": self.failed, "rows": self.rows, "figures": self.figures}
        paths = [folder / "gpu-check.json", folder / "gpu-check.md"]
        paths[0].write_text(json.dumps(document, indent=1) + "\n")
        paths[1].write_text(self.markdown())
        return paths
