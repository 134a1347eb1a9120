"""SPEC §8: item discrimination and fragility, their correlation, and compression to k items.

Random draws come from `rng_for(seed, stream)`: one independent stream per statistic, so
adding a statistic never shifts another's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fragility_tui.analysis.classify import Classification, classify
from fragility_tui.grid.cube import Cube
from fragility_tui.analysis.rankings import champion_count

STREAM_CORRELATION, STREAM_TOP_K, STREAM_RANDOM_SUBSETS, STREAM_DECISIONS = 1, 2, 3, 4
STREAM_TWO_WAY, STREAM_POOLED_SHARE = 7, 6  # 5 is calibration's
TIE_RTOL = 1e-12
CONSTANT_ATOL = 1e-12
_GATHER_BUDGET = 8_000_000  # elements per vectorised chunk: keeps memory flat at any size
COUNT_BLOCK = 1 << 17  # draws counted or gathered at once (1 MB of indices: stays in cache)


def rng_for(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), stream])


def resample_draws(rng: np.random.Generator, n: int, rows: int) -> np.ndarray:
    """[rows, n] item indices of `rows` bootstrap resamples of size n, the draws behind
    resample_counts (the same stream)."""
    small = np.uint16 if n <= np.iinfo(np.uint16).max else np.int64
    return rng.integers(0, n, size=(rows, n), dtype=small)


def resample_counts(rng: np.random.Generator, n: int, rows: int, dtype=np.float64,
                    out: np.ndarray | None = None) -> np.ndarray:
    """[rows, n] counts of each of n items in `rows` bootstrap resamples of size n (with
    replacement), written into `out` when given. Draws use the narrowest integer type that
    holds n: numpy generates 16-bit bounded integers several times faster, and the type
    depends only on n (deterministic). All rows are drawn in one call (the stream depends on
    how draws are split into calls); they are counted a block of rows at a time, so the
    offset indices and counts stay in cache instead of four passes over rows x n x 8 bytes."""
    draws = resample_draws(rng, n, rows)
    out = np.empty((rows, n), dtype=dtype) if out is None else out
    block = max(1, min(rows, COUNT_BLOCK // max(n, 1)))
    offsets = np.arange(block, dtype=np.intp)[:, None] * n
    for start in range(0, rows, block):
        k = min(block, rows - start)
        flat = np.add(draws[start:start + k], offsets[:k], dtype=np.intp)
        out[start:start + k] = np.bincount(flat.ravel(), minlength=k * n).reshape(k, n)
    return out


def discrimination(cube: Cube) -> np.ndarray:
    """[I] corrected item-total correlation under the reference config; NaN when undefined.

    Per item, over models with that reference cell: x = the item's bit, y = the model's
    reference accuracy over its *other* present cells (§11). Pearson r of x and y;
    undefined when x or y is constant or fewer than two models qualify.
    """
    ref = cube.reference_index
    x = cube.bits[:, :, ref].astype(np.float64)
    w = cube.present[:, :, ref]
    n_m = w.sum(axis=1)
    c_m = x.sum(axis=1)
    valid = w & (n_m[:, None] > 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = (c_m[:, None] - x) / (n_m[:, None] - 1)
    v = valid.astype(np.float64)
    y = np.where(valid, y, 0.0)
    n_i = v.sum(axis=0)
    safe_n = np.maximum(n_i, 1)
    xd = (x - (v * x).sum(axis=0) / safe_n) * v
    yd = (y - (v * y).sum(axis=0) / safe_n) * v
    sxx, syy, sxy = (xd * xd).sum(axis=0), (yd * yd).sum(axis=0), (xd * yd).sum(axis=0)
    n_correct = (v * x).sum(axis=0)
    y_range = np.where(valid, y, -np.inf).max(axis=0) - np.where(valid, y, np.inf).min(axis=0)
    defined = (n_i >= 2) & (n_correct > 0) & (n_correct < n_i) & (y_range > CONSTANT_ATOL)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = sxy / np.sqrt(sxx * syy)
    return np.where(defined, r, np.nan)


def fragility(cube: Cube, cls: Classification | None = None) -> np.ndarray:
    """[I] fraction of models with a complete row for the item that are fragile on it."""
    cls = cls if cls is not None else classify(cube)
    n = cls.complete.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, cls.fragile.sum(axis=0) / np.maximum(n, 1), np.nan)


def pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 2 or np.ptp(x) <= CONSTANT_ATOL or np.ptp(y) <= CONSTANT_ATOL:
        return None
    xd, yd = x - x.mean(), y - y.mean()
    return float((xd @ yd) / np.sqrt((xd @ xd) * (yd @ yd)))


def bootstrap_pearson_ci(x: np.ndarray, y: np.ndarray, n_boot: int, rng: np.random.Generator,
                         level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap over items. Each chunk of resamples becomes a count matrix W
    [rows, n]; one matmul with the columns (1, x, y, x², y², xy) gives every resample's
    sums at once. Degenerate resamples (a constant column) are dropped."""
    n = len(x)
    if n < 2 or n_boot < 1:
        return None
    moments = np.stack([np.ones(n), x, y, x * x, y * y, x * y], axis=1)
    rows = max(1, _GATHER_BUDGET // n)
    sums = []
    for start in range(0, n_boot, rows):
        k = min(rows, n_boot - start)
        sums.append(resample_counts(rng, n, k) @ moments)
    s1, sx, sy, sxx, syy, sxy = np.concatenate(sums).T
    cov = sxy - sx * sy / s1
    var_x, var_y = sxx - sx * sx / s1, syy - sy * sy / s1
    ok = (var_x > CONSTANT_ATOL * s1) & (var_y > CONSTANT_ATOL * s1)
    if not ok.any():
        return None
    r = cov[ok] / np.sqrt(var_x[ok] * var_y[ok])
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(r, [tail, 100 - tail])
    return float(lo), float(hi)


TWO_WAY_RESAMPLES = 200  # at most: the interval needs a standard deviation (±5% at 200), not tails
Z_95 = 1.959963984540054


def two_way_pearson_ci(cube: Cube, cls: Classification, r: float, n_boot: int,
                       rng: np.random.Generator):
    """95% interval of the discrimination-fragility r when both items and models are
    resampled: r ± 1.96·sd (cut to [-1, 1]), sd over resamples that draw models and items with replacement
    (each to its own count) and recompute every figure on the resampled grid: each model's
    score over the drawn items (one copy of the item itself left out), each item's
    corrected item-total r over the drawn models (weighted by how often each is drawn), its
    fragility over them, then r over the drawn items. With a dozen models the model sample,
    not the item sample, dominates r's uncertainty; SPEC §8's interval resamples items only.
    Not a percentile interval: a resample holds ~8 distinct models of 12, which attenuates
    every item's discrimination, so resampled r sits well below r (mean 0.13 vs 0.25 on the
    shipped synthetic grid) while its spread is still a fair standard error.
    Item-total discrimination only."""
    ref = cube.reference_index
    x = cube.bits[:, :, ref].astype(np.float64)  # [M, I]
    w = cube.present[:, :, ref].astype(np.float64)
    comp = cls.complete.astype(np.float64)
    frag = (cls.fragile & cls.complete).astype(np.float64)
    n_m, n_i = x.shape
    if n_m < 2 or n_i < 2 or n_boot < 1:
        return None
    wx = w * x  # present and correct
    rows = max(1, _GATHER_BUDGET // (4 * n_i))
    out = []
    for start in range(0, n_boot, rows):
        k = min(rows, n_boot - start)
        wm = resample_counts(rng, n_m, k)  # [k, M] model multiplicities
        wi = resample_counts(rng, n_i, k)  # [k, I] item multiplicities
        c_km, n_km = wi @ x.T, wi @ w.T  # each model's correct / present over drawn items
        # y = a·(C − x) with a = 1/(N − 1) on the model's present cells (N > 1): every
        # weighted sum over models below is then a [k, M] @ [M, I] product, no [k, M, I]
        wv = wm * (n_km > 1)
        a = np.divide(1.0, n_km - 1, out=np.zeros_like(n_km), where=n_km > 1)
        wa, wac, wa2 = wv * a, wv * a * c_km, wv * a * a
        n, sx = wv @ w, wv @ wx
        sy = wac @ w - wa @ wx
        sxy = wac @ wx - wa @ wx
        syy = (wa2 * c_km * c_km) @ w - 2 * (wa2 * c_km) @ wx + wa2 @ wx
        with np.errstate(invalid="ignore", divide="ignore"):
            var_y = syy - sy * sy / n
            disc = (sxy - sx * sy / n) / np.sqrt((sx - sx * sx / n) * var_y)
            fr = (wm @ frag) / (wm @ comp)
        ok = (n >= 2) & (sx > 0) & (sx < n) & (var_y > CONSTANT_ATOL * n) & np.isfinite(fr)
        c = wi * ok
        disc, fr = np.where(ok, disc, 0.0), np.where(ok, fr, 0.0)
        s1, dx, fy = c.sum(axis=1), (c * disc).sum(axis=1), (c * fr).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            cov = (c * disc * fr).sum(axis=1) - dx * fy / s1
            vx = (c * disc * disc).sum(axis=1) - dx * dx / s1
            vy = (c * fr * fr).sum(axis=1) - fy * fy / s1
            good = (s1 > 0) & (vx > CONSTANT_ATOL * s1) & (vy > CONSTANT_ATOL * s1)
            out.append((cov / np.sqrt(vx * vy))[good])
    boot = np.concatenate(out)
    if len(boot) < 2:
        return None
    sd = float(boot.std(ddof=1))
    # r ± 1.96·sd can leave [-1, 1] with few items or models: a correlation cannot
    return max(-1.0, r - Z_95 * sd), min(1.0, r + Z_95 * sd)


@dataclass(frozen=True, eq=False)
class TopK:
    """The k highest values with ties at the cut broken by seeded draws."""

    k: int
    above: np.ndarray  # indices strictly above the tie band: always chosen
    tie_band: np.ndarray  # indices tied with the value at the cut
    slots: int  # how many of tie_band each draw takes

    def draws(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """[n, k] sorted subsets: the items above the band and, per row, the band's slots
        drawn without replacement (one rng.choice each), or all of the band."""
        if self.slots == len(self.tie_band):
            chosen = np.broadcast_to(self.tie_band, (n, self.slots))
        else:
            chosen = np.stack([rng.choice(self.tie_band, size=self.slots, replace=False)
                               for _ in range(n)])
        above = np.broadcast_to(self.above, (n, len(self.above)))
        return np.sort(np.concatenate([above, chosen], axis=1), axis=1)

    @property
    def deterministic(self) -> bool:
        return self.slots in (0, len(self.tie_band))


def top_k(values: np.ndarray, k: int) -> TopK:
    """Top-k of the defined (finite) values; ties: equal within 1e-12 relative (§11)."""
    defined = np.flatnonzero(np.isfinite(values))
    k = min(k, len(defined))
    if k == 0:
        empty = np.array([], dtype=np.intp)
        return TopK(0, empty, empty, 0)
    v = values[defined]
    cut = np.sort(v)[::-1][k - 1]
    tol = TIE_RTOL * np.maximum(np.abs(v), abs(cut))
    tied = np.abs(v - cut) <= tol
    above = defined[(v > cut) & ~tied]
    band = defined[tied]
    return TopK(k, above, band, k - len(above))


def tie_draws(top: TopK, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """[n_draws, k] subsets; one row when the cut has no tie to break."""
    return top.draws(rng, 1 if top.deterministic or n_draws <= 1 else n_draws)


def subset_champion_counts(cube: Cube, subsets: np.ndarray) -> np.ndarray:
    """[D] distinct champions over configs when the grid is cut to each row of subsets
    ([D, k] item indices); accuracy per (model, config) over present cells of the subset."""
    d, k = subsets.shape
    bits_t = np.ascontiguousarray(cube.bits.transpose(1, 0, 2))  # [I, M, C]
    pres_t = None if cube.complete else np.ascontiguousarray(cube.present.transpose(1, 0, 2))
    per_row = k * bits_t.shape[1] * bits_t.shape[2]
    rows = max(1, _GATHER_BUDGET // max(per_row, 1))
    out = []
    for start in range(0, d, rows):
        idx = subsets[start:start + rows]
        correct = bits_t[idx].sum(axis=1, dtype=np.int32)  # [d, M, C]
        present = (np.full_like(correct, k) if pres_t is None
                   else pres_t[idx].sum(axis=1, dtype=np.int32))
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = np.where(present > 0, correct / np.maximum(present, 1), np.nan)
        out.append(champion_count(acc))
    return np.concatenate(out)


def random_subsets(n_items: int, k: int, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """[n_draws, k] item indices drawn without replacement; the whole grid when k ≥ items."""
    if k >= n_items:
        return np.arange(n_items)[None, :]
    return np.sort(np.stack([rng.choice(n_items, size=k, replace=False)
                             for _ in range(n_draws)]), axis=1)


@dataclass(frozen=True)
class ItemSummary:
    discrimination: np.ndarray  # [I]
    fragility: np.ndarray  # [I]
    r: float | None
    ci: tuple[float, float] | None  # resampling items (SPEC §8)
    top_k: int
    top_k_items: np.ndarray  # indices behind top_k_mean_fragility (first tie draw)
    top_k_mean_fragility: float | None
    mean_fragility: float | None
    k: int
    random_mean_champions: float | None
    discriminative_mean_champions: float | None
    discriminative_range: tuple[int, int] | None
    ci_two_way: tuple[float, float] | None = None  # resampling items and models
    irt: dict | None = None  # with method "irt": irt.irt_limits (model count, warning, SEs)


def _mean_defined(values: np.ndarray) -> float | None:
    v = values[np.isfinite(values)]
    return float(v.mean()) if len(v) else None


DISCRIMINATION_METHODS = ("item-total", "irt")


def item_discrimination(cube: Cube, method: str = "item-total") -> np.ndarray:
    """[I] discrimination by `method`: the corrected item-total correlation (SPEC §8's
    default) or the 2PL IRT slope (analysis.irt)."""
    if method == "item-total":
        return discrimination(cube)
    if method == "irt":
        from fragility_tui.analysis.irt import irt_discrimination  # scipy, on first use

        return irt_discrimination(cube)
    raise ValueError(f"discrimination must be one of {', '.join(DISCRIMINATION_METHODS)}, "
                     f"not {method!r}")


def item_summary(cube: Cube, cls: Classification | None = None, *, seed: int = 0,
                 n_boot: int = 2000, k: int = 100, n_random: int = 1000,
                 method: str = "item-total") -> ItemSummary:
    """Every §8 figure; `method` picks the discrimination behind r, top-k and the
    discriminative compression."""
    irt_info = None
    if method == "irt":
        from fragility_tui.analysis.irt import irt_fit, irt_limits  # scipy, on first use

        fit = irt_fit(cube)
        disc, irt_info = fit.a, irt_limits(cube, fit)
    else:
        disc = item_discrimination(cube, method)
    frag = fragility(cube, cls)
    both = np.isfinite(disc) & np.isfinite(frag)
    r = pearson(disc[both], frag[both])
    ci = (bootstrap_pearson_ci(disc[both], frag[both], n_boot, rng_for(seed, STREAM_CORRELATION))
          if r is not None else None)
    two_way = (two_way_pearson_ci(cube, cls if cls is not None else classify(cube), r,
                                  min(n_boot, TWO_WAY_RESAMPLES), rng_for(seed, STREAM_TWO_WAY))
               if r is not None and method == "item-total" else None)
    top = top_k(disc, k)
    draws = tie_draws(top, n_random, rng_for(seed, STREAM_TOP_K)) if top.k else None
    top_items = draws[0] if draws is not None else np.array([], dtype=np.intp)
    n_items = len(cube.items)
    random_mean = disc_mean = disc_range = None
    if n_items and k > 0:
        rand = random_subsets(n_items, k, n_random, rng_for(seed, STREAM_RANDOM_SUBSETS))
        random_mean = float(subset_champion_counts(cube, rand).mean())
    if draws is not None:
        counts = subset_champion_counts(cube, draws)
        disc_mean, disc_range = float(counts.mean()), (int(counts.min()), int(counts.max()))
    return ItemSummary(
        discrimination=disc, fragility=frag, r=r, ci=ci, top_k=top.k, top_k_items=top_items,
        top_k_mean_fragility=_mean_defined(frag[top_items]) if len(top_items) else None,
        mean_fragility=_mean_defined(frag), k=k, random_mean_champions=random_mean,
        discriminative_mean_champions=disc_mean, discriminative_range=disc_range,
        ci_two_way=two_way, irt=irt_info)
