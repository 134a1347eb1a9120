"""Pane 3: adjacent pairs and their gap split; Enter → the items behind the stable and
fragile parts."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable, Static

from fragility_tui.tui.formats import num, pct
from fragility_tui.tui.messages import ShowPair
from fragility_tui.tui.panes.base import Pane
from fragility_tui.tui.widgets import Column, ReportTable

COLUMNS = [Column("A"), Column("B"), Column("gap Δ", "int"), Column("|S|", "int"),
           Column("A only", "int"), Column("B only", "int"), Column("stable gap", "int"),
           Column("fragile gap", "int"), Column("fragile share", "num"), Column("verdict"),
           Column("manufactured"), Column("reversals", "int"), Column("decision (observed)"),
           Column("decision (balanced)")]

VERDICT_STYLE = {"identical": "yellow", "one item": "yellow", "cancel": "magenta",
                 "ordered": "green"}


def decision_label(decisions: list[dict], a: str, b: str, target: str,
                   reference: str) -> Text | None:
    """The pair's decision at the reference config in use (o0.letter, or the grid's stand-in)."""
    for d in decisions:
        if {d["a"], d["b"]} == {a, b} and d["target"] == target and \
                d.get("config", reference) == reference:
            style = "green" if d["label"] == "stable" else "yellow"
            return Text(d["label"], style=style)
    return None


class PairsPane(Pane, pane_id="pairs", title="Pairs", above="pairs-summary"):
    help = "Adjacent pairs of the reference ranking (A above B). Enter: items behind the gap."

    def render_view(self, view) -> None:
        report = view.report
        decisions = report.get("decisions", [])
        reference = report.get("grid", {}).get("reference", "o0.letter")
        rows = []
        for p in report.get("pairs", []):
            verdict = Text(p["verdict"], style=VERDICT_STYLE.get(p["verdict"], ""))
            manufactured = Text("MANUFACTURED", style="bold red") if p["manufactured"] else Text("no")
            rows.append((f"{p['a']}\x1f{p['b']}",
                         [p["a"], p["b"], p["gap"], p["stable_items"], p["a_only_stable"],
                          p["b_only_stable"], p["stable_gap"], p["fragile_gap"],
                          p["fragile_share"], verdict, manufactured, p.get("reversals"),
                          decision_label(decisions, p["a"], p["b"], "observed", reference),
                          decision_label(decisions, p["a"], p["b"], "balanced", reference)]))
        table = self.query_one(ReportTable)
        table.set_data(COLUMNS, rows)
        table.border_title = "Adjacent pairs"
        self.update_caption()
        s = report.get("pairs_summary", {})
        summary = Text()
        summary.append(f"{s.get('manufactured', 0)} of {s.get('nonzero_gaps', 0)} nonzero gaps "
                       "manufactured", style="bold")
        summary.append(f" · fragile share mean {pct(s.get('mean_fragile_share'))} % · pooled "
                       f"{pct(s.get('pooled_fragile_share'))} %")
        rk = report.get("rankings", {})
        summary.append(f" · {rk.get('champion_count', '—')} champions over configs · mean "
                       f"Kendall τ {num(rk.get('mean_kendall_tau'))}")
        self.query_one("#pairs-summary", Static).update(summary)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        a, b = event.row_key.value.split("\x1f")
        self.post_message(ShowPair(a, b))
