"""The full report of SPEC §4–9 as typed records (analysis/report_sections.py); its text and
Markdown renderings are analysis/report_text.py's.

`report_of` is the single source the CLI, the TUI panes and every export read (`build_report`
is its JSON document). It puts the cube in canonical order first (models by name, items by
benchmark then uid), so the result depends only on the grid's content, the selection and
the seed; every section reads one accuracy table and one classification (analysis/basis.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fragility_tui import SPEC_VERSION
from fragility_tui.analysis.axes import preserved_fractions
from fragility_tui.analysis.basis import Basis, measure
from fragility_tui.analysis.classify import bands
from fragility_tui.analysis.decisions import TARGETS, decide_pairs
from fragility_tui.analysis.itemstats import item_summary
from fragility_tui.analysis.near_ties import near_tie_fragility
from fragility_tui.analysis.pairs import (adjacent_pairs, gap_splits, pairs_summary,
                                          reference_ranking)
from fragility_tui.analysis.pooled_share import pooled_share_ci
from fragility_tui.analysis.rankings import rankings
from fragility_tui.analysis.report_sections import (AxisAblation, BandRow, CompressionSummary,
                                                    ConfigRow, Cost, DiscriminationSummary,
                                                    GridSection, RankingsSummary, Report,
                                                    ReportSettings)
from fragility_tui.grid.cube import Cube
from fragility_tui.harness.configs import REFERENCE


def _num(x) -> float | None:
    """JSON-safe float: NaN/inf (undefined) become None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _mean_defined(values) -> float | None:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return float(np.mean(v)) if v else None


def build_report(cube: Cube | Basis, **options) -> dict:
    """The report's JSON document (`report_of(cube, **options).to_json()`)."""
    return report_of(cube, **options).to_json()


def report_of(cube: Cube | Basis, *, target: str = "observed", margin: float = 2.0,
              seed: int = 0, pairs=(), n_boot: int = 2000, k: int = 100, n_random: int = 1000,
              name: str | None = None, costs: dict | None = None,
              discrimination: str = "item-total", near_tie=None) -> Report:
    """Every statistic of SPEC §4–9 on the cube as given (already selected), or on its
    basis when the caller measured it already (the app does).

    pairs: extra (a, b) model pairs to split and decide beside the adjacent ones.
    target: which target the renderings lead with; the report always holds both (§11).
    costs: optional {model: {"seconds_per_item": float|None, "tokens_per_item": ...}} from
    the store's runs; shown beside accuracy (§9), never folded into any statistic.
    near_tie: optional bool [M, I, C] of the cells recorded near_tie (aligned with cube;
    default: the cube's own mask, when it carries one): adds `near_ties`, per model the
    fragile rows only near-tie cells make fragile.
    discrimination: "item-total" (SPEC §8's corrected item-total correlation) or "irt"
    (2PL slopes, analysis.irt) behind the discrimination figures and compression.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    basis = cube if isinstance(cube, Basis) else measure(cube)
    cube, acc, cls = basis.cube, basis.accuracy, basis.classification  # canonical order
    ref = cube.reference_index
    order = reference_ranking(cube, acc)
    adjacent = adjacent_pairs(cube, acc)
    extra = _extra_pairs(cube, pairs, adjacent)

    splits = (gap_splits(cube, adjacent, cls, acc)
              + gap_splits(cube, extra, cls, acc, adjacent=False))
    ranks_ = rankings(cube, acc)
    items = item_summary(cube, cls, seed=seed, n_boot=n_boot, k=k, n_random=n_random,
                         method=discrimination)
    decision_pairs = adjacent + extra
    decisions = decide_pairs(
        cube, [(cube.models[a], cube.models[b]) for a, b in decision_pairs], margin=margin,
        seed=seed, n_boot=n_boot, adjacent=[True] * len(adjacent) + [False] * len(extra),
        cls=cls)

    return Report(
        spec_version=SPEC_VERSION,
        grid=_grid_section(cube, name, [cube.models[m] for m in order]),
        settings=ReportSettings(
            target=target, margin=float(margin), seed=int(seed), n_boot=int(n_boot), k=int(k),
            n_random=int(n_random), reference=cube.reference,
            reference_is_spec=cube.reference == REFERENCE, discrimination=discrimination),
        bands=_bands_section(bands(cube, cls, acc), ranks_, order, ref),
        pairs=tuple(splits),
        pairs_summary=replace(pairs_summary([s for s in splits if s.adjacent]),
                              pooled_fragile_share_ci=pooled_share_ci(
                                  cube, adjacent, cls, n_boot=n_boot, seed=seed)),
        configs=_configs_section(cube, ranks_, order),
        rankings=_rankings_section(cube, ranks_, order, ref),
        axes=_axes_section(preserved_fractions(cube, cls), cube, order),
        discrimination=DiscriminationSummary(
            method=discrimination, r=items.r, ci=items.ci, ci_two_way=items.ci_two_way,
            irt=items.irt, top_k=items.top_k,
            top_k_mean_fragility=items.top_k_mean_fragility,
            mean_fragility=items.mean_fragility,
            items_defined=int(np.isfinite(items.discrimination).sum())),
        compression=CompressionSummary(
            k=int(k), random_mean_champions=items.random_mean_champions,
            discriminative_mean_champions=items.discriminative_mean_champions,
            discriminative_range=items.discriminative_range, grid_items=len(cube.items)),
        decisions=tuple(decisions),
        costs=None if costs is None else {
            cube.models[m]: Cost(*(_num((costs.get(cube.models[m]) or {}).get(key))
                                   for key in ("seconds_per_item", "tokens_per_item")))
            for m in order},
        near_ties=_near_ties(basis.source, near_tie))


def _near_ties(cube: Cube, near_tie) -> tuple | None:
    """Per model, the fragile rows only near-tie cells make fragile; `near_tie` is aligned
    with the cube as given (else the cube's own mask); None when there is neither."""
    near_tie = cube.near_tie if near_tie is None else near_tie
    return None if near_tie is None else tuple(near_tie_fragility(cube, near_tie))


def first_sections(cube: Cube | Basis, *, name: str | None = None) -> Report:
    """The report's grid, bands and configs sections alone (SPEC §4–6, no bootstrap): what
    the app shows first on a big grid while report_of computes the rest. Marked
    `partial`; each section equals report_of's."""
    basis = cube if isinstance(cube, Basis) else measure(cube)
    cube, acc = basis.cube, basis.accuracy
    order = reference_ranking(cube, acc)
    ranks_ = rankings(cube, acc)
    return Report(spec_version=SPEC_VERSION, partial=True,
                  grid=_grid_section(cube, name, [cube.models[m] for m in order]),
                  bands=_bands_section(bands(cube, basis.classification, acc), ranks_, order,
                                       cube.reference_index),
                  configs=_configs_section(cube, ranks_, order))


def _grid_section(cube: Cube, name: str | None, ranked: list[str]) -> GridSection:
    return GridSection(name=name, models=tuple(ranked), n_items=len(cube.items),
                       configs=tuple(cube.configs), reference=cube.reference,
                       benchmarks=tuple(sorted(set(map(str, cube.benchmarks)))),
                       complete=cube.complete)


def _bands_section(band_list, ranks_, order, ref: int) -> tuple[BandRow, ...]:
    # rank: 1 + models strictly ahead at the reference, so exact ties share a rank (§6)
    return tuple(BandRow(int(ranks_.ranks[m, ref]) or None, band_list[m]) for m in order)


def _extra_pairs(cube: Cube, pairs, adjacent) -> list[tuple[int, int]]:
    pos = {m: k for k, m in enumerate(cube.models)}
    out = []
    for a, b in pairs:
        for name in (a, b):
            if name not in pos:
                raise ValueError(f"unknown model {name!r} in pair {a},{b}")
        if a == b:
            raise ValueError(f"pair {a},{b} names the same model twice")
        pair = (pos[a], pos[b])
        if pair not in adjacent and pair not in out:
            out.append(pair)
    return out


def _configs_section(cube, r, order) -> tuple[ConfigRow, ...]:
    out = []
    for c, config in enumerate(cube.configs):
        champs = [m for m in order if r.champions[m, c]]
        out.append(ConfigRow(
            config=config,
            accuracy={cube.models[m]: _num(r.accuracy[m, c]) for m in order},
            champions=tuple(cube.models[m] for m in champs),
            margins={cube.models[m]: int(r.margins[m, c]) for m in champs},
            # each champion is paired with the runner-up on the items both have, so tied
            # champions can differ when cells are missing: report the smallest margin
            margin_items=min((int(r.margins[m, c]) for m in champs), default=None),
            kendall_tau=_num(r.agreement.kendall_tau[c]),
            flipped_pair_fraction=_num(r.agreement.flipped_fraction[c])))
    return tuple(out)


def _rankings_section(cube, r, order, ref) -> RankingsSummary:
    ever_champ = r.champions.any(axis=1)
    top3 = ((r.ranks >= 1) & (r.ranks <= 3)).any(axis=1)
    others = [c for c in range(len(cube.configs)) if c != ref]
    return RankingsSummary(
        champion_count=int(ever_champ.sum()),
        champions=tuple(cube.models[m] for m in order if ever_champ[m]),
        top3_models=tuple(cube.models[m] for m in order if top3[m]),
        mean_kendall_tau=_mean_defined(r.agreement.kendall_tau[others].tolist()),
        mean_flipped_pair_fraction=_mean_defined(r.agreement.flipped_fraction[others].tolist()),
        median_margin_by_champion={
            cube.models[m]: float(np.median(r.margins[m, r.champions[m]]))
            for m in order if ever_champ[m]})


def _axes_section(axes, cube, order) -> AxisAblation:
    return AxisAblation(
        per_model={cube.models[m]: {a: _num(axes[a][m]) for a in axes} for m in order},
        mean={a: _mean_defined(axes[a].tolist()) for a in axes})
