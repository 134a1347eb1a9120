"""The report as typed records: what the app's panes read (attributes, not string keys) and
what `Report.to_json()` writes as the JSON document of `report --json` and the exports.

Each record's `to_json` fixes its keys and their order; the JSON is part of the contract
(SPEC: every figure is exported), so a new field is added here and in its `to_json`.
Figures are fractions (accuracies, shares) or item counts; None where undefined.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fragility_tui.analysis.classify import Band
from fragility_tui.analysis.decisions import Decision
from fragility_tui.analysis.pairs import GapSplit, PairsSummary


def _pair(values) -> list | None:
    return None if values is None else list(values)


@dataclass(frozen=True)
class GridSection:
    name: str | None
    models: tuple[str, ...]  # in reference ranking order
    n_items: int
    configs: tuple[str, ...]  # in view, canonical order
    reference: str
    benchmarks: tuple[str, ...]
    complete: bool
    # a simulated grid (grid/simulate.py), not model outputs: the store's flag, set by
    # services.reports.grid_report (a cube alone does not know it)
    synthetic: bool = False

    def to_json(self) -> dict:
        return {"name": self.name, "models": list(self.models), "n_items": self.n_items,
                "configs": list(self.configs), "reference": self.reference,
                "benchmarks": list(self.benchmarks), "complete": self.complete,
                "synthetic": self.synthetic}


@dataclass(frozen=True)
class ReportSettings:
    target: str  # which target the renderings lead with (the report holds both)
    margin: float  # points
    seed: int
    n_boot: int
    k: int
    n_random: int
    reference: str  # the config every figure is measured against (SPEC's is o0.letter)
    reference_is_spec: bool
    discrimination: str  # "item-total" or "irt"

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BandRow:
    """A model's band (SPEC §5) with its reference rank: 1 + models strictly ahead, so
    exact ties share a rank (§6); None without a reference accuracy."""

    rank: int | None
    band: Band

    def to_json(self) -> dict:
        return {"rank": self.rank, **self.band.to_json()}


@dataclass(frozen=True)
class ConfigRow:
    """One config's ranking (SPEC §6): accuracies and champions by model name."""

    config: str
    accuracy: dict[str, float | None]  # model -> accuracy, reference ranking order
    champions: tuple[str, ...]
    margins: dict[str, int]  # champion -> margin in items over the runner-up
    margin_items: int | None  # the smallest champion margin
    kendall_tau: float | None  # against the reference ranking
    flipped_pair_fraction: float | None

    def to_json(self) -> dict:
        return {"config": self.config, "accuracy": dict(self.accuracy),
                "champions": list(self.champions), "margins": dict(self.margins),
                "margin_items": self.margin_items, "kendall_tau": self.kendall_tau,
                "flipped_pair_fraction": self.flipped_pair_fraction}


@dataclass(frozen=True)
class RankingsSummary:
    champion_count: int
    champions: tuple[str, ...]  # champion under some config
    top3_models: tuple[str, ...]
    mean_kendall_tau: float | None  # over configs other than the reference
    mean_flipped_pair_fraction: float | None
    median_margin_by_champion: dict[str, float]

    def to_json(self) -> dict:
        return {"champion_count": self.champion_count, "champions": list(self.champions),
                "top3_models": list(self.top3_models),
                "mean_kendall_tau": self.mean_kendall_tau,
                "mean_flipped_pair_fraction": self.mean_flipped_pair_fraction,
                "median_margin_by_champion": dict(self.median_margin_by_champion)}


@dataclass(frozen=True)
class AxisAblation:
    """SPEC §7: preserved fraction of reference-correct answers per axis (analysis.axes.AXES)."""

    per_model: dict[str, dict[str, float | None]]  # model -> axis -> fraction
    mean: dict[str, float | None]  # axis -> mean over models

    def to_json(self) -> dict:
        return {"per_model": {m: dict(v) for m, v in self.per_model.items()},
                "mean": dict(self.mean)}


@dataclass(frozen=True)
class DiscriminationSummary:
    """SPEC §8: discrimination against fragility."""

    method: str
    r: float | None
    ci: tuple[float, float] | None  # items resampled (SPEC §8)
    top_k: int
    top_k_mean_fragility: float | None
    mean_fragility: float | None
    items_defined: int
    ci_two_way: tuple[float, float] | None = None  # items and models resampled
    irt: dict | None = None  # slope standard errors and the model-count warning (IRT only)

    def to_json(self) -> dict:
        return {"method": self.method, "r": self.r, "ci": _pair(self.ci), "ci_unit": "items",
                "ci_two_way": _pair(self.ci_two_way), "ci_two_way_unit": "items and models",
                "irt": self.irt, "top_k": self.top_k,
                "top_k_mean_fragility": self.top_k_mean_fragility,
                "mean_fragility": self.mean_fragility, "items_defined": self.items_defined}


@dataclass(frozen=True)
class CompressionSummary:
    """SPEC §8: champions over configs when the grid is cut to k items."""

    k: int
    random_mean_champions: float | None
    discriminative_mean_champions: float | None
    discriminative_range: tuple[int, int] | None
    grid_items: int | None = None  # k at or above it: every "subset" is the whole grid

    @property
    def cuts(self) -> bool:
        """Whether k is below the grid's items (else nothing was compressed)."""
        return self.grid_items is None or self.k < self.grid_items

    def to_json(self) -> dict:
        return {"k": self.k, "random_mean_champions": self.random_mean_champions,
                "discriminative_mean_champions": self.discriminative_mean_champions,
                "discriminative_range": _pair(self.discriminative_range),
                "grid_items": self.grid_items}


@dataclass(frozen=True)
class Cost:
    """A model's cost per item from its runs (SPEC §9: beside accuracy, never folded in)."""

    seconds_per_item: float | None
    tokens_per_item: float | None

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Report:
    """Every statistic of SPEC §4–9 on one cube. A `partial` report holds only the grid,
    bands and configs (what the app shows first on a big grid); the rest is then None or
    empty."""

    spec_version: str
    grid: GridSection
    bands: tuple[BandRow, ...]  # reference ranking order
    configs: tuple[ConfigRow, ...]  # canonical config order
    settings: ReportSettings | None = None
    pairs: tuple[GapSplit, ...] = ()  # adjacent pairs, then the named ones
    pairs_summary: PairsSummary | None = None  # over the adjacent pairs
    rankings: RankingsSummary | None = None
    axes: AxisAblation | None = None
    discrimination: DiscriminationSummary | None = None
    compression: CompressionSummary | None = None
    decisions: tuple[Decision, ...] = ()
    costs: dict[str, Cost] | None = None  # model -> cost; None without runs asked for
    partial: bool = False
    near_ties: tuple | None = None  # analysis.near_ties rows; None when no mask was given

    def to_json(self) -> dict:
        if self.partial:
            return {"spec_version": self.spec_version, "partial": True,
                    "grid": self.grid.to_json(), "bands": [b.to_json() for b in self.bands],
                    "configs": [c.to_json() for c in self.configs]}
        return {
            "spec_version": self.spec_version,
            "grid": self.grid.to_json(),
            "settings": self.settings.to_json(),
            "bands": [b.to_json() for b in self.bands],
            "pairs": [s.to_json() for s in self.pairs],
            "pairs_summary": self.pairs_summary.to_json(),
            "configs": [c.to_json() for c in self.configs],
            "rankings": self.rankings.to_json(),
            "axes": self.axes.to_json(),
            "discrimination": self.discrimination.to_json(),
            "compression": self.compression.to_json(),
            "decisions": [d.to_json() for d in self.decisions],
            "costs": None if self.costs is None else {
                m: c.to_json() for m, c in self.costs.items()},
            **({} if self.near_ties is None else {
                "near_ties": [asdict(row) for row in self.near_ties]}),
        }
