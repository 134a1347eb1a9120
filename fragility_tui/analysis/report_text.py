"""The report's text and Markdown renderings (`report`, `export --what report --format
markdown`): titled tables read from the typed Report (analysis/report_sections.py), laid
out for a width; `calibrate` prints its own Sections through the same renderer.

No cell is ever cut (issue 60: `harness-…nsitive`, `smollm2…ct+int4`): a table too wide for
a terminal puts each row's names on a line of their own above its figures, and a table
printed for a script (stdout not a terminal) keeps one line per row whatever its width.
Negative numbers use the ASCII minus throughout (grep finds `-0.4` in a row and its
interval alike)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from fragility_tui.analysis.decision_words import lacking_benchmarks
from fragility_tui.analysis.intervals import ASCII_MINUS, MINUS, interval
from fragility_tui.analysis.pairs import GapSplit, PairsSummary
from fragility_tui.analysis.report_sections import (AxisAblation, BandRow, CompressionSummary,
                                                    ConfigRow, DiscriminationSummary,
                                                    RankingsSummary, Report)
from fragility_tui.harness.configs import REFERENCE
import textwrap

from fragility_tui.text import clean

TEXT_WIDTH = 100


@dataclass(frozen=True)
class Section:
    """A titled table (when it has headers) and notes: what both renderings print, for the
    report and for `calibrate`. keys: how many leading columns name a row (model, pair,
    config): a table too wide for the terminal prints them on a line of their own."""

    title: str
    headers: Sequence[str] = ()
    rows: Sequence[Sequence] = ()
    notes: Sequence[str] = ()
    keys: int = 1


def _one_line(text) -> str:
    """Model names and ids are untrusted: nothing a terminal obeys, on one line."""
    return clean(text, limit=500, one_line=True)


def _pct(x, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}"


def _flt(x, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ci(ci, scale: float = 100.0, digits: int = 1) -> str:
    return "-" if ci is None else interval(scale * ci[0], scale * ci[1], digits, ASCII_MINUS)


def _reference_gaps(report: Report) -> list[str]:
    """Models without a cell at the reference: every pair and decision of theirs is measured
    there, so those tables are empty for them; say so and which configs every model has (a
    grid imported from several harnesses' logs: its first config may be one harness's)."""
    lacking = [row.band.model for row in report.bands if row.band.reference is None]
    if not lacking:
        return []
    shared = [c.config for c in report.configs
              if all(v is not None for v in c.accuracy.values())]
    named = ", ".join(shared[:3]) + (f" and {len(shared) - 3} more" if len(shared) > 3 else "")
    return [f"no cells at the reference {report.grid.reference} for {', '.join(lacking)}: "
            "their pairs and decisions are empty; "
            + (f"configs every model has: {named} (--reference picks one)" if shared
               else "no config has cells of every model")]


def _sections(report: Report) -> list[Section]:
    """The report as titled tables, shared by both renderings."""
    g = report.grid
    notes = [f"{'SYNTHETIC ' if g.synthetic else ''}grid {g.name or '-'}: "
             f"{len(g.models)} models x {g.n_items} items x "
             f"{len(g.configs)} configs; reference {g.reference}; spec v{report.spec_version}"]
    if g.reference != REFERENCE:
        notes.append(f"reference {g.reference} stands in for SPEC's {REFERENCE}: every figure "
                     "is measured against it")
    notes += _reference_gaps(report)
    title = "Grid (SYNTHETIC: simulated, not model outputs)" if g.synthetic else "Grid"
    secs = [Section(title, notes=notes), _bands_table(report.bands)]
    if report.costs:
        secs.append(Section(
            "Cost per item (beside accuracy, not folded into it)",
            headers=["model", "ref acc", "seconds", "tokens"],
            rows=[[row.band.model, _pct(row.band.reference),
                      _flt(report.costs[row.band.model].seconds_per_item, 3),
                      _flt(report.costs[row.band.model].tokens_per_item, 1)]
                     for row in report.bands]))
    if any(row.near_tie_cells for row in report.near_ties or ()):
        secs.append(Section(
            "Near-ties: fragility that rounding alone can explain",
            headers=["model", "fragile rows", "only via near-ties", "near-tie cells"],
            rows=[[r.model, r.fragile, r.only_near_ties, r.near_tie_cells]
                     for r in report.near_ties],
            notes=["a fragile row is fragile only via near-ties when its cells outside "
                      "the run's rounding tolerance (margin, near_tie) all agree"]))
    secs += [_pairs_table(report.pairs, report.pairs_summary), _configs_table(report.configs),
             _rankings_notes(report.rankings, len(g.models)), _axes_table(report.axes),
             _discrimination_notes(report.discrimination, report.compression),
             _decisions_table(report)]
    return secs


def _bands_table(bands: tuple[BandRow, ...]) -> Section:
    return Section(
        "Bands (accuracy %, SPEC 5)",
        headers=["#", "model", "ref", "min", "min at", "max", "max at", "spread", "robust",
                    "frag%ref", "RC", "RW", "frag", "inc"],
        rows=[[row.rank or "-", b.model, _pct(b.reference), _pct(b.min), b.min_config or "-",
                  _pct(b.max), b.max_config or "-", _pct(b.spread), _pct(b.robust_accuracy),
                  _pct(b.fragile_share_of_reference_correct), b.robust_correct,
                  b.robust_wrong, b.fragile, b.incomplete]
                 for row in bands for b in [row.band]],
        keys=2)


def _pairs_table(pairs: tuple[GapSplit, ...], ps: PairsSummary) -> Section:
    return Section(
        "Pairs: gap split in items (SPEC 6)",
        headers=["A", "B", "gap", "|S|", "A+", "B+", "stab", "inc", "frag", "share%",
                    "verdict", "support", "rev"],
        keys=2,
        rows=[[p.a, p.b, p.gap, p.stable_items, p.a_only_stable, p.b_only_stable,
                  p.stable_gap, p.incomplete_gap, p.fragile_gap, _share(p.fragile_share),
                  p.verdict + ("" if p.adjacent else " *"), p.support or "-", p.reversals]
                 for p in pairs],
        notes=[f"{ps.nonzero_gaps} nonzero adjacent gaps: {ps.manufactured} manufactured, "
               f"{ps.supported} supported, {ps.reversed} reversed; fragile share mean "
               f"{_pct(ps.mean_fragile_share)}%, pooled {_pct(ps.pooled_fragile_share)}% "
               f"(95% CI {_ci(ps.pooled_fragile_share_ci)} % points, resampling items)",
               "A+/B+: stable items only A / only B gets right in every config; "
               "inc: the part of gap on items with a missing cell (not fragility); "
               "support: the exact test of A+ against B+ (manufactured: p >= 0.05; "
               "reversed: the stable items order the pair against its gap); "
               "share% marked ! leaves 0-100: the stable items lean against the gap; "
               "* = a named pair, not adjacent"]
              + [f"{p.a} vs {p.b}: {p.detail}" for p in pairs if p.detail]
              + [f"{p.a} vs {p.b}: fragile share {_pct(p.fragile_share)}%, over 100 because the "
                 f"stable items order the pair against its gap ({p.a_only_stable} vs "
                 f"{p.b_only_stable}, exact p {p.mcnemar_p:.3g})"
                 for p in pairs if p.fragile_share is not None and p.fragile_share > 1 + 1e-9])


def _share(share) -> str:
    """A fragile share in percent, marked where it leaves 0-100 (SPEC §6 v4)."""
    return _pct(share) + ("" if share is None or -1e-9 <= share <= 1 + 1e-9 else " !")


def _configs_table(configs: tuple[ConfigRow, ...]) -> Section:
    return Section(
        "Configs (SPEC 6)",
        headers=["config", "champion(s)", "acc", "margin", "tau-b", "flipped"],
        rows=[[c.config, ", ".join(c.champions) or "-",
                  _pct(c.accuracy.get(c.champions[0]) if c.champions else None),
                  "-" if c.margin_items is None else c.margin_items,
                  _flt(c.kendall_tau), _pct(c.flipped_pair_fraction)]
                 for c in configs],
        keys=2)  # too wide for the terminal: a config and its champions above the figures


def _rankings_notes(r: RankingsSummary, n_models: int) -> Section:
    return Section("Rankings", notes=[
        f"{r.champion_count} of {n_models} models are champion somewhere: "
        + (", ".join(r.champions) or "-"),
        f"{len(r.top3_models)} reach the top 3: " + (", ".join(r.top3_models) or "-"),
        f"mean Kendall tau-b {_flt(r.mean_kendall_tau)}; mean flipped pair fraction "
        f"{_pct(r.mean_flipped_pair_fraction)}%",
        "median margin (items): " + (", ".join(f"{m} {v:g}" for m, v in
                                               r.median_margin_by_champion.items()) or "-"),
    ])


def _axes_table(ax: AxisAblation) -> Section:
    return Section(
        "Axis ablation: preserved fraction of reference-correct (SPEC 7)",
        headers=["model", *ax.mean],
        rows=[[m, *(_flt(v[a]) for a in ax.mean)] for m, v in ax.per_model.items()]
                + [["mean", *(_flt(ax.mean[a]) for a in ax.mean)]])


def _discrimination_notes(d: DiscriminationSummary, c: CompressionSummary) -> Section:
    rng = c.discriminative_range
    method = {"irt": "2PL IRT slope"}.get(d.method, "item-total correlation")
    irt = d.irt or {}  # analysis.irt.irt_limits: the fit's model count and slope errors
    return Section("Discrimination, fragility, compression (SPEC 8)", notes=[
        f"discrimination-fragility r {_flt(d.r)}; 95% CI {_ci(d.ci, 1.0, 2)} "
        f"resampling items, {_ci(d.ci_two_way, 1.0, 2)} resampling items and models",
        f"discrimination = {method}"
        + ("" if not irt.get("slope_se_median") else
           f" (median slope standard error {_flt(irt['slope_se_median'])})"),
        *([] if not irt.get("warning") else [f"warning: {irt['warning']}"]),
        *([] if not irt.get("slope_se_warning") else [f"warning: {irt['slope_se_warning']}"]),
        *([] if not irt.get("two_way_ci") else [f"note: {irt['two_way_ci']}"]),
        f"mean fragility: top-{d.top_k} discriminative {_flt(d.top_k_mean_fragility)} "
        f"vs all items {_flt(d.mean_fragility)}",
        f"champions with {c.k} items: random {_flt(c.random_mean_champions, 1)}, "
        f"by discrimination {_flt(c.discriminative_mean_champions, 1)}"
        + ("" if rng is None else f" (range {rng[0]}-{rng[1]})") if c.cuts else
        f"champions with all {c.grid_items} items: {_flt(c.random_mean_champions, 1)} (k = "
        f"{c.k} is not below the grid's {c.grid_items} items: nothing to compress)",
    ])


def _decisions_table(report: Report) -> Section:
    target = report.settings.target if report.settings else "observed"
    margin = report.settings.margin if report.settings else 2.0
    ordered = sorted(report.decisions, key=lambda x: x.target != target)
    rows = [[x.a, x.b, x.target, _pct(x.delta), _ci(x.ci), _ci(x.simultaneous_ci), x.label,
             ", ".join(x.flags[1:]) or "-"] for x in ordered]
    lacking = [f"{x.a} vs {x.b} ({x.target}): unsupported: " + lacking_benchmarks(
        x.unsupported_benchmarks, {b.benchmark: b.n_items for b in x.per_benchmark})
        for x in ordered if x.unsupported_benchmarks]
    return Section(
        f"Decisions at {report.grid.reference} (SPEC 9; delta in points, "
                 f"margin {margin:g})",
        headers=["A", "B", "target", "delta", "95% CI", "family CI", "label", "more flags"],
        rows=rows,
        keys=2,
        notes=["more flags: the blocking flags after the label; family CI: the simultaneous "
               "95% interval over all adjacent pairs of that target (max-deviation "
               "bootstrap; '-' for a pair not adjacent); the balanced target needs 20 paired "
               "items in every benchmark (SPEC 9 v4)", *lacking])


def _is_number(text: str) -> bool:
    return text.lstrip("-[" + MINUS).replace(".", "", 1)[:1].isdigit()


def _lines(headers, rows, widths, sep: int, indent: str = "") -> list[str]:
    gap = " " * sep
    out = [indent + gap.join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for r in rows:
        out.append(indent + gap.join(v.rjust(w) if _is_number(v) else v.ljust(w)
                                     for v, w in zip(r, widths)).rstrip())
    return out


def render_table(headers, rows, width: int, keys: int = 1, stack: bool = True) -> list[str]:
    """A table's lines, no cell cut: two spaces between columns, or one, when that fits
    width; a table wider still puts each row's first `keys` columns (its names) on a line of
    their own and the other columns, aligned, indented below it (stack), or keeps one line
    per row however wide (not stack: a script reads it)."""
    headers = [str(h) for h in headers]
    rows = [[_one_line(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(headers)]
    for sep in (2, 1):
        if sum(widths) + sep * (len(widths) - 1) <= width:
            return _lines(headers, rows, widths, sep)
    if not stack:
        return _lines(headers, rows, widths, 2)
    keys = max(1, min(keys, len(headers) - 1))
    rest = widths[keys:]
    sep = 2 if sum(rest) + 2 * (len(rest) - 1) + 2 <= width else 1
    body = _lines(headers[keys:], [r[keys:] for r in rows], rest, sep, indent="  ")
    out = ["  ".join(headers[:keys]), body[0]]
    for r, line in zip(rows, body[1:]):
        out += ["  ".join(r[:keys]), line]
    # a line still too wide (long names, a cell listing several) breaks between words,
    # never inside one: a name is never cut
    return [piece for line in out for piece in (
        [line] if len(line) <= width else
        textwrap.wrap(line, width, subsequent_indent="    ", break_long_words=False,
                      break_on_hyphens=False))]


def render_text(report: Report, width: int = TEXT_WIDTH, fit_tables: bool = True) -> str:
    """The full report (report_of's, not a partial one) as text: prose wrapped to width,
    tables laid out for it (fit_tables) or one line per row (for a script)."""
    return render_sections(_sections(report), width, fit_tables)


def render_sections(sections: list[Section], width: int = TEXT_WIDTH,
                    fit_tables: bool = True) -> str:
    """Titled tables and notes as text: prose wraps to width; tables are laid out for it
    (render_table), stacked when too wide if fit_tables, else one line per row however wide.
    Nothing is ever cut."""
    out = []
    for sec in sections:
        title = textwrap.wrap(_one_line(sec.title), width, break_on_hyphens=False) or [""]
        out += title
        out.append("-" * min(max(map(len, title)), width))
        if sec.headers:
            out += render_table(sec.headers, sec.rows, width, sec.keys, stack=fit_tables)
        for note in sec.notes:  # prose wraps, never cut mid-sentence (issue 43)
            out += textwrap.wrap(_one_line(note), width, subsequent_indent="  ",
                                 break_on_hyphens=False) or [""]
        out.append("")
    return "\n".join(out)


def _md_cell(value) -> str:
    return _one_line(value).replace("\\", "\\\\").replace("|", "\\|")


def render_markdown(report: Report) -> str:
    """The full report as Markdown tables."""
    out = []
    for sec in _sections(report):
        out.append(f"### {sec.title}")
        out.append("")
        if sec.headers:
            out.append("| " + " | ".join(_md_cell(h) for h in sec.headers) + " |")  # |S|
            out.append("|" + "|".join("---" for _ in sec.headers) + "|")
            out.extend("| " + " | ".join(_md_cell(v) for v in r) + " |" for r in sec.rows)
            out.append("")
        for note in sec.notes:
            out.append(f"- {_md_cell(note)}")
        if sec.notes:
            out.append("")
    return "\n".join(out)
