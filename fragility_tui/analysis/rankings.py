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


def runner_up_mask(accuracy: np.ndarray, champs: np.ndarray) -> np.ndarray:
    """[M, C] bool: the best non-champions per config (highest defined accuracy among the
    models that are not champion; ties all count). Empty where every model ties."""
    rival = np.where(champs | np.isnan(accuracy), -np.inf, accuracy)
    best = rival.max(axis=0, keepdims=True)
    return (rival == best) & np.isfinite(best)


def champion_margins(cube: Cube, champs: np.ndarray, accuracy: np.ndarray) -> np.ndarray:
    """[M, C] int margins in items of each champion over the runner-up (the best
    non-champion by accuracy, §11), counted on the items where both the champion and the
    runner-up have that config's cell (§11 paired margins). With several runners-up tied
    in accuracy the champion's margin is the smallest over them. 0 when every model ties;
    entries of non-champions are 0."""
    runners = runner_up_mask(accuracy, champs)
    out = np.zeros(champs.shape, dtype=np.int64)
    for c in np.flatnonzero(champs.any(axis=0) & runners.any(axis=0)):
        ch, ru = np.flatnonzero(champs[:, c]), np.flatnonzero(runners[:, c])
        bits, pres = cube.bits[:, :, c], cube.present[:, :, c]
        # items x gets right among those y also has (a bit implies its cell is present)
        ch_right = bits[ch].astype(np.int64) @ pres[ru].T.astype(np.int64)  # [champ, runner]
        ru_right = pres[ch].astype(np.int64) @ bits[ru].T.astype(np.int64)
        out[ch, c] = (ch_right - ru_right).min(axis=1)
    return out


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
    return Rankings(acc.accuracy, champs, champion_margins(cube, champs, acc.accuracy),
                    ranks(acc.accuracy),
                    rank_agreement(acc.accuracy, cube.reference_index))


def champion_count(accuracy: np.ndarray) -> np.ndarray:
    """Distinct champions over configs; accuracy [..., M, C] -> [...]."""
    return champions_mask(accuracy).any(axis=-1).sum(axis=-1)
