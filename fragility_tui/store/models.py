"""Model rows of a grid: who made its cells and with which settings. Mixed into Store, whose
`connect` and `_in_transaction` they use.

A model row carries a *fingerprint*: every setting that can change one of its cells (weights
identity, dtype, quantisation, device type, backend, attention, max_new_tokens, parser and
prompt versions, chat template and its arguments, prompt mode, BOS). A run records its cells
under a model name only when its fingerprint equals the row's (`record_model`); a row from
before fingerprints (NULL) is filled by the first run that records one.
"""

from __future__ import annotations

import json
import re

from fragility_tui.errors import InputError

MODEL_KEYS = ("model", "source", "revision", "dtype", "quantization", "base_model")


class FingerprintMismatch(InputError):
    """A run's settings differ from those that made a model's cells in a grid."""

    def __init__(self, grid: str, model: str, differences: list[str]):
        self.differences = differences
        super().__init__(
            f"model {model!r} in grid {grid!r} was evaluated with other settings "
            f"({'; '.join(differences)}); its cells would mix two settings. Record this run "
            "under another model name with --name NEW_NAME, or use another --grid",
            field="--model")


def _show(value) -> str:
    if value is None:
        return "none"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text[:12] + "…" if re.fullmatch(r"[0-9a-f]{32,}", text) else text  # a hash: its start


def fingerprint_diff(old: dict | None, new: dict) -> list[str]:
    """'field old → new' for every field both fingerprints hold and that differs (a field
    only one of them has is not a difference: fingerprints may gain fields over versions)."""
    if not old:
        return []
    return [f"{key} {_show(old[key])} → {_show(new[key])}"
            for key in sorted(set(old) & set(new)) if old[key] != new[key]]


def legacy_fingerprint(provenance: dict | None) -> dict:
    """The fingerprint fields a model row from before fingerprints (schema < 3) still tells
    through its runner provenance: a first run compares these, so it fills the fingerprint
    when they agree and is refused when they do not (imported or simulated rows tell none)."""
    p = provenance or {}
    if "weights_sha256" not in p:
        return {}
    mode = {"chat template": "chat", "raw prompt": "raw"}.get(p.get("prompt_mode"))
    quant = p.get("quantization")
    legacy = {"weights_sha256": p["weights_sha256"], "revision": p.get("revision"),
              "dtype": p.get("dtype"),
              "quantization": (f"{quant.get('library')} {quant.get('weights')} weights"
                               if isinstance(quant, dict) else quant),
              "max_new_tokens": p.get("max_new_tokens"), "add_bos": p.get("add_bos"),
              "prompt_mode": mode}
    if p.get("device"):
        legacy["device_type"] = str(p["device"]).split(":")[0]
    if mode == "chat":
        legacy["chat_template_sha256"] = p.get("chat_template_sha256")
    return {k: v for k, v in legacy.items() if k in ("revision", "quantization") or v is not None}


class ModelRecords:
    def upsert_model(self, grid: str, model: str, *, source: str | None = None,
                     revision: str | None = None, dtype: str | None = None,
                     quantization: str | None = None, base_model: str | None = None,
                     provenance: dict | None = None, fingerprint: dict | None = None,
                     con=None) -> None:
        """Write a model row whole (imports and simulations, which replace a grid's models)."""
        args = [grid, model, source, revision, dtype, quantization, base_model,
                json.dumps(provenance or {}, sort_keys=True, default=str),
                json.dumps(fingerprint, sort_keys=True) if fingerprint else None]
        self._in_transaction(con, lambda c: c.execute(
            "INSERT OR REPLACE INTO models (grid, model, source, revision, dtype, quantization, "
            "base_model, provenance, fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", args))

    def model_fingerprint(self, grid: str, model: str) -> tuple[bool, dict | None]:
        """(whether the grid has this model row, its fingerprint or None)."""
        with self.connect() as con:
            rows = con.execute("SELECT fingerprint FROM models WHERE grid = ? AND model = ?",
                               [grid, model]).fetchall()
        if not rows:
            return False, None
        return True, json.loads(rows[0][0]) if rows[0][0] else None

    @staticmethod
    def _recorded(row) -> dict | None:
        """A row's fingerprint, or what its provenance tells of one (legacy rows)."""
        if row[0]:
            return json.loads(row[0])
        return legacy_fingerprint(json.loads(row[1] or "{}"))

    def check_model(self, grid: str, model: str, fingerprint: dict) -> None:
        """Refuse (FingerprintMismatch) a fingerprint other than the one of the model's
        existing cells in this grid; reads only."""
        with self.connect() as con:
            rows = con.execute("SELECT fingerprint, provenance FROM models WHERE grid = ? "
                               "AND model = ?", [grid, model]).fetchall()
        differences = fingerprint_diff(self._recorded(rows[0]) if rows else None, fingerprint)
        if differences:
            raise FingerprintMismatch(grid, model, differences)

    def record_model(self, grid: str, model: str, *, fingerprint: dict, source: str | None,
                     revision: str | None, dtype: str | None, quantization: str | None,
                     base_model: str | None, provenance: dict, con=None) -> None:
        """Add the model row if absent, fill a NULL fingerprint, keep an equal one; a
        different one is refused, all in one transaction (never a blind replace): the
        caller's (`con`, merge's) or one of its own."""
        def work(con):
            rows = con.execute("SELECT fingerprint, provenance FROM models WHERE grid = ? "
                               "AND model = ?", [grid, model]).fetchall()
            text = json.dumps(fingerprint, sort_keys=True)
            prov = json.dumps(provenance, sort_keys=True, default=str)
            if not rows:
                con.execute("INSERT INTO models (grid, model, source, revision, dtype, "
                            "quantization, base_model, provenance, fingerprint) VALUES "
                            "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [grid, model, source, revision, dtype, quantization, base_model,
                             prov, text])
                return
            differences = fingerprint_diff(self._recorded(rows[0]), fingerprint)
            if differences:
                raise FingerprintMismatch(grid, model, differences)
            if rows[0][0] is None:  # a row from before fingerprints: this run defines it
                con.execute("UPDATE models SET fingerprint = ?, provenance = ?, source = ?, "
                            "revision = ?, dtype = ?, quantization = ?, base_model = ? "
                            "WHERE grid = ? AND model = ?",
                            [text, prov, source, revision, dtype, quantization, base_model,
                             grid, model])
        self._in_transaction(con, work)

    def list_models(self, grid: str) -> list[dict]:
        with self.connect() as con:
            rows = con.execute(
                "SELECT model, source, revision, dtype, quantization, base_model, provenance, "
                "fingerprint FROM models WHERE grid = ? ORDER BY model", [grid]).fetchall()
        return [dict(zip(MODEL_KEYS, r[:6]), provenance=json.loads(r[6] or "{}"),
                     fingerprint=json.loads(r[7]) if r[7] else None) for r in rows]
