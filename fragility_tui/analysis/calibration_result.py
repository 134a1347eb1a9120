"""A verdict calibration (analysis/calibration.py's JSON document, as services.reports.
grid_calibration returns it and `calibrate --json` prints it) as typed records, read once
here so that what renders it (the `calibrate` command's text) reads attributes.

The document itself stays the contract (its keys are in docs/spec.md and cached in the
store); these records only read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fragility_tui.analysis.calibration import FAMILY, SCENARIOS
from fragility_tui.analysis.intervals import interval


@dataclass(frozen=True)
class Rate:
    """A share of replicates with its 95% Wilson interval (binomial.rate)."""

    count: int
    n: int
    rate: float | None  # None when n is 0
    ci_low: float
    ci_high: float

    @classmethod
    def from_json(cls, doc: dict) -> "Rate":
        return cls(doc["count"], doc["n"], doc["rate"], doc["ci_low"], doc["ci_high"])

    def percent(self) -> str:
        """'12', or '–' when there were no replicates."""
        return "–" if self.rate is None else f"{100 * self.rate:.0f}"

    def with_interval(self, digits: int = 0) -> str:
        """'12% [9, 16]', or '–' when there were no replicates."""
        if not self.n:
            return "–"
        return (f"{100 * self.rate:.{digits}f}% "
                f"{interval(100 * self.ci_low, 100 * self.ci_high, digits)}")


def _rates(doc: dict) -> dict[str, Rate]:
    return {name: Rate.from_json(r) for name, r in doc.items()}


@dataclass(frozen=True)
class Tally:
    """A scenario's replicates of one pair (or of all pairs, in the totals)."""

    verdicts: dict[str, Rate]
    manufactured: Rate
    labels: dict[str, dict[str, Rate]]  # target -> label -> rate
    # target -> replicates whose label is an error under the scenario's truth (None: the
    # observed grid, no known truth)
    false_alarms: dict[str, Rate] | None
    true_gap_points: float | None  # a pair's truth (None in the totals, or undefined)
    true_gaps_points: tuple  # the totals: one truth per pair, pooled
    doc: dict  # the scenario's tally as the JSON has it (for is_false_alarm)

    @classmethod
    def from_json(cls, doc: dict) -> "Tally":
        alarms = doc.get("false_alarms")
        return cls(_rates(doc["verdicts"]), Rate.from_json(doc["manufactured"]),
                   {t: _rates(labels) for t, labels in doc["labels"].items()},
                   None if alarms is None else _rates(alarms), doc.get("true_gap_points"),
                   tuple(doc.get("true_gaps_points", ())), doc)

    def share(self, outcome: str, target: str | None = None) -> Rate:
        """The rate of an outcome: a verdict, 'manufactured', or (with target) a label."""
        if target is not None:
            return self.labels[target][outcome]
        return self.manufactured if outcome == "manufactured" else self.verdicts[outcome]


@dataclass(frozen=True)
class Observed:
    """What the grid itself gives the pair."""

    gap: int
    verdict: str
    manufactured: bool
    labels: dict[str, str]  # target -> decision label

    @property
    def outcome(self) -> str:
        """The gap split's outcome: manufactured, or else its verdict."""
        return "manufactured" if self.manufactured else self.verdict


@dataclass(frozen=True)
class PairCalibration:
    a: str
    b: str
    adjacent: bool
    observed: Observed
    scenarios: dict[str, Tally]  # calibration.SCENARIOS -> tally


@dataclass(frozen=True)
class FamilyLine:
    """How often the largest adjacent gap under the exchangeable null reaches the observed."""

    replicates: int
    observed_largest_gap_points: float
    null_mean_largest_gap_points: float | None
    at_least_observed: Rate


@dataclass(frozen=True)
class CalibrationResult:
    grid: str
    reference: str
    replicates: int
    seed: int
    n_boot: int
    margin_points: float
    pairs: tuple[PairCalibration, ...]
    totals: dict[str, Tally]  # over the pairs, per scenario
    total_replicates: int
    family: FamilyLine | None
    pairs_reused: int
    pairs_computed: int

    @classmethod
    def from_json(cls, doc: dict) -> "CalibrationResult":
        settings, totals, family = doc["settings"], doc["totals"], doc.get(FAMILY)
        return cls(
            grid=doc["grid"], reference=settings["reference"],
            replicates=settings["replicates"], seed=settings["seed"],
            n_boot=settings["n_boot"], margin_points=settings["margin_points"],
            pairs=tuple(PairCalibration(
                p["a"], p["b"], p["adjacent"], Observed(**p["observed"]),
                {s: Tally.from_json(p[s]) for s in SCENARIOS}) for p in doc["pairs"]),
            totals={s: Tally.from_json(totals[s]) for s in SCENARIOS},
            total_replicates=totals["replicates"],
            family=FamilyLine(family["replicates"], family["observed_largest_gap_points"],
                              family["null_mean_largest_gap_points"],
                              Rate.from_json(family["at_least_observed"])) if family else None,
            pairs_reused=doc["cache"]["pairs_reused"],
            pairs_computed=doc["cache"]["pairs_computed"])
