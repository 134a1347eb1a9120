"""SPEC §6 per-config rankings: champions, margins, top 3, Kendall tau-b, flipped pairs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.analysis.classify import ConfigAccuracy, config_accuracy
from fragility_tui.grid.cube import Cube
from fragility_tui.analysis.pairs import ranks


def champions_mask(accuracy: np.ndarray) -> np.ndarray:
    """[M, C] bool: models with the highest defined accuracy in each config (ties all count).
    Works on any leading batch shape [..., M, C]."""
    best = np.nanmax(np.where(np.isnan(accuracy), -np.inf, accuracy), axis=-2, keepdims=True)
    return (accuracy == best) & np.isfinite(best)


def champion_margins(cube: Cube, champs: np.ndarray) -> np.ndarray:
    """[M, C] int margins in items of each champion over the best non-champion, counted on
    the items where every model has that config's cell (§11 paired margins); 0 if all tie.
    Entries of non-champions are 0."""
    shared = cube.present.all(axis=0)  # [I, C]
    counts = np.count_nonzero(cube.bits & shared[None], axis=1).astype(np.int64)  # [M, C]
    has_rival = (~champs).any(axis=0)
    best_rival = np.where(champs, -1, counts).max(axis=0)
    margin = np.where(has_rival[None, :], counts - best_rival[None, :], 0)
    return np.where(champs, margin, 0)


def sign_matrix(values: np.ndarray) -> np.ndarray:
    """[M, M, C] sign(v_i - v_j) with NaN for undefined entries."""
    with np.errstate(invalid="ignore"):
        return np.sign(values[:, None, :] - values[None, :, :])


@dataclass(frozen=True, eq=False)
class RankAgreement:
    """Per config against the reference: Kendall tau-b and the flipped pair fraction."""

    kendall_tau: np.ndarray  # [C], NaN when undefined
    flipped_fraction: np.ndarray  # [C], NaN when no pair is strictly ordered in the reference


def rank_agreement(accuracy: np.ndarray, ref: int) -> RankAgreement:
    """tau-b = Σ s_ref·s_c / sqrt(#untied_ref · #untied_c) over pairs i<j, computed over
    models with a defined accuracy in both the config and the reference."""
    m = accuracy.shape[0]
    upper = np.triu(np.ones((m, m), dtype=bool), k=1)[:, :, None]
    defined = np.isfinite(accuracy) & np.isfinite(accuracy[:, [ref]])  # [M, C]
    both = defined[:, None, :] & defined[None, :, :] & upper
    s_c = np.nan_to_num(sign_matrix(accuracy)) * both
    s_r = np.nan_to_num(sign_matrix(accuracy[:, [ref]])) * both
    concord = (s_c * s_r).sum(axis=(0, 1))
    untied_c = np.abs(s_c).sum(axis=(0, 1))
    untied_r = np.abs(s_r).sum(axis=(0, 1))
    denom = np.sqrt(untied_c * untied_r)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(denom > 0, concord / np.where(denom > 0, denom, 1), np.nan)
        flipped = (s_r * s_c < 0).sum(axis=(0, 1))
        frac = np.where(untied_r > 0, flipped / np.maximum(untied_r, 1), np.nan)
    return RankAgreement(tau, frac)


@dataclass(frozen=True, eq=False)
class Rankings:
    accuracy: np.ndarray  # [M, C]
    champions: np.ndarray  # bool [M, C]
    margins: np.ndarray  # int [M, C], meaningful where champions
    ranks: np.ndarray  # int [M, C], 0 = undefined
    agreement: RankAgreement


def rankings(cube: Cube, acc: ConfigAccuracy | None = None) -> Rankings:
    acc = acc if acc is not None else config_accuracy(cube)
    champs = champions_mask(acc.accuracy)
    return Rankings(acc.accuracy, champs, champion_margins(cube, champs), ranks(acc.accuracy),
                    rank_agreement(acc.accuracy, cube.reference_index))


def champion_count(accuracy: np.ndarray) -> np.ndarray:
    """Distinct champions over configs; accuracy [..., M, C] -> [...]."""
    return champions_mask(accuracy).any(axis=-1).sum(axis=-1)
