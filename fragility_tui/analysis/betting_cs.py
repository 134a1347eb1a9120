"""The betting confidence sequences of sequential comparisons (analysis/sequential.py, issue
45), vectorised over rows of sequences and candidate means.

- Betting confidence sequence for sampling without replacement (Waudby-Smith & Ramdas 2020,
  "Confidence sequences for sampling without replacement", NeurIPS; the betting form of
  their 2024 JRSS-B paper): for a candidate pool mean m, after n draws with sum s the mean of
  the items not yet drawn is mu(m) = (N m - s) / (N - n); if m is the pool's mean, the next
  draw has expectation mu(m), so the hedged capital
      K(m) = 1/2 prod(1 + l+ (x - mu(m))) + 1/2 prod(1 - l- (x - mu(m)))
  is a nonnegative martingale with K = 1, and by Ville's inequality it ever reaches 1/alpha
  with probability at most alpha. The sequence is the set of m whose capital has never
  reached 1/alpha (a running intersection) and that the draws leave possible
  (s <= N m <= s + N - n). Bets are predictable (they read only earlier draws), so any bet
  keeps the guarantee; the default (BET = "growth") is the growth-rate plug-in per
  candidate, aGRAPA of Waudby-Smith & Ramdas (2024): one signed bet
  l(m) = g / (v + g^2), g = (mean - mu(m)) n' / (n' + PRIOR_DRAWS), and the capital
  prod(1 + l(m)(x - mu(m))), which bets more the farther a candidate sits from the running
  mean. The factor n' / (n' + PRIOR_DRAWS) (issue 58) is PRIOR_DRAWS pseudo-draws at the
  candidate's own mean: it holds back the first bets, whose sign is mostly noise (0: the
  plain aGRAPA bet before issue 58). "hedged" is the predictable plug-in of the capital
  above, l = sqrt(2 log(2/alpha) / (v n' log(1 + n'))), n' = n + 1. "ons" is the online
  Newton step bet (Cutkosky & Orabona 2018), "mixture" the average capital of constant bets
  (MIXTURE_SCALES of the largest of either sign); both measured against the growth bet for
  issue 58 and kept for comparison (benchmarks/sequential_sim.py --issue58, docs/spec.md,
  "Settle sooner": at 25% discordance, alpha 0.05 and the even grid, a 5-point gap settles
  on a median 27% of a 3,679-item pool with the plain growth bet, 27% with the mixture, 28%
  with ONS, 36% hedged; 22% with the growth bet's prior draws and the zoomed grid). In all,
  mean and v are the running mean and variance estimate ((1/2 + s) / n', (1/4 + sum (x -
  mean)^2) / n'), and a bet is truncated at 1/2 of the largest that keeps the capital
  positive.
- The capital is computed for a grid of candidate means at once: the pool's attainable
  means j / (2 N) when there are at most GRID_POINTS of them (exact), else GRID_POINTS
  evenly spaced ones plus ZOOM_POINTS between 1/2 - ZOOM_HALF_WIDTH and 1/2 +
  ZOOM_HALF_WIDTH (Δ within ±10 points, a step of 0.05 points: where the verdicts are read),
  the bounds then widened to the neighbouring candidate.
"""

from __future__ import annotations

import numpy as np

GRID_POINTS = 801
# a finer grid near the centre (Δ within ±10 points, a candidate every 0.05 points), where
# the verdicts are read (zero, the margin): the bounds are widened by the local step
ZOOM_HALF_WIDTH = 0.05
ZOOM_POINTS = 401
# the growth bet's running gap is shrunk towards the candidate by this many pseudo-draws
# at the candidate's mean (0: the plain aGRAPA plug-in, the bet before issue 58)
PRIOR_DRAWS = 30
TRUNCATION = 0.5
BETS = ("growth", "hedged", "ons", "mixture")
# the mixture's constant bets, as shares of the largest that keeps the capital positive
MIXTURE_SCALES = 2.0 ** -np.arange(1, 7)
BET = "growth"
TOL = 1e-9


class WorBettingCS:
    """K rows of without-replacement betting confidence sequences, each over its own pool
    (n_pool[k] items) at its own level alpha[k], vectorised over candidate means."""

    def __init__(self, n_pool, alpha, points: int = GRID_POINTS, finite: bool = True,
                 bet: str | None = None, zoom: int | None = None,
                 prior: float | None = None):
        bet = bet or BET
        if bet not in BETS:
            raise ValueError(f"bet must be one of {BETS}, not {bet!r}")
        self.bet = bet
        self.prior = PRIOR_DRAWS if prior is None else float(prior)
        self.finite = finite  # False: the with-replacement (population) sequence
        self.n_pool = np.asarray(n_pool, dtype=np.int64)
        self.alpha = np.broadcast_to(np.asarray(alpha, dtype=float), self.n_pool.shape).copy()
        k = len(self.n_pool)
        # candidate pool means of x: the attainable j / (2N) when few enough, else a grid
        if finite and k:
            points = int(min(points, 2 * self.n_pool.max() + 1))
        self.exact = (2 * self.n_pool + 1 <= points) & finite
        u = np.linspace(0.0, 1.0, points)
        zoom = ZOOM_POINTS if zoom is None else zoom
        if zoom and not self.exact.all():  # finer near Δ = 0, where verdicts are read
            fine = np.linspace(0.5 - ZOOM_HALF_WIDTH, 0.5 + ZOOM_HALF_WIDTH, zoom)
            u = np.unique(np.round(np.concatenate([u, fine]), 12))
        u = u[None, :]
        lattice = np.round(u * 2 * self.n_pool[:, None]) / (2 * np.maximum(self.n_pool, 1))[:, None]
        self.grid = np.where(self.exact[:, None], lattice, u)
        self.step = np.where(self.exact, 0.0, 1.0 / max(points - 1, 1))
        points = u.shape[1]
        self.n = np.zeros(k, dtype=np.int64)
        self.s = np.zeros(k)  # sum of x drawn
        self.sq = np.zeros(k)  # sum of (x - running mean before it)^2
        self.log_plus = np.zeros((k, points))
        self.log_minus = np.zeros((k, points)) if bet == "hedged" else None
        self.lam = np.zeros((k, points)) if bet == "ons" else None  # ONS: the next bet
        self.ons_a = np.ones((k, points)) if bet == "ons" else None  # 1 + sum of gradients^2
        # mixture: the log capital of each constant bet (scales x 2 signs)
        self.log_mix = (np.zeros((k, points, 2 * len(MIXTURE_SCALES)))
                        if bet == "mixture" else None)
        self.rejected = np.zeros((k, points), dtype=bool)
        self.threshold = np.log(1.0 / self.alpha)

    def update(self, rows: np.ndarray, x: np.ndarray) -> None:
        """One draw x[j] in [0, 1] for each row rows[j] (distinct rows)."""
        rows = np.asarray(rows, dtype=np.intp)
        x = np.asarray(x, dtype=float)
        n, s, big_n = self.n[rows], self.s[rows], self.n_pool[rows]
        if np.any(n >= big_n):
            raise ValueError("a row drew more items than its pool holds")
        mean_before = (0.5 + s) / (n + 1.0)
        var = (0.25 + self.sq[rows]) / (n + 1.0)
        w = self._open_window(rows)
        if w is not None:
            self._bet_window(rows, w, x, n, s, big_n, mean_before, var)
        self.sq[rows] += (x - mean_before) ** 2
        self.s[rows] = s + x
        self.n[rows] = n + 1

    def _open_window(self, rows) -> slice | None:
        """The columns some of these rows still hold: a rejected candidate stays rejected
        (the running intersection), so its capital is never read again and need not be
        updated (None: every candidate of these rows is rejected)."""
        open_cols = ~self.rejected[rows].all(axis=0)
        if not open_cols.any():
            return None
        lo = int(np.argmax(open_cols))
        return slice(lo, len(open_cols) - int(np.argmax(open_cols[::-1])))

    def _bet_window(self, rows, w, x, n, s, big_n, mean_before, var) -> None:
        """Bet on the candidates in columns w of these rows and reject those whose capital
        reaches 1/alpha, or that the draw rules out."""
        grid = self.grid[rows, w]
        if self.finite:  # the mean of the items not yet drawn, if the pool's mean is m
            remaining = (big_n - n).astype(float)
            mu = (big_n[:, None] * grid - s[:, None]) / remaining[:, None]
        else:  # draws from a population whose mean is m
            mu = grid
        inside = (mu > TOL) & (mu < 1.0 - TOL)
        mu_c = np.clip(mu, 1e-12, 1.0 - 1e-12)
        dev = x[:, None] - mu_c
        if self.bet == "growth":
            log_k = self._growth_bet(rows, w, n, mean_before, var, mu_c, dev, inside)
        elif self.bet == "hedged":
            log_k = self._hedged_bet(rows, w, n, var, mu_c, dev, inside)
        elif self.bet == "ons":
            log_k = self._ons_bet(rows, w, mu_c, dev, inside)
        else:
            log_k = self._mixture_bet(rows, w, mu_c, dev, inside)
        xs = x[:, None]
        impossible = ((mu < -TOL) | (mu > 1.0 + TOL) | ((mu <= TOL) & (xs > 0.0))
                      | ((mu >= 1.0 - TOL) & (xs < 1.0)))
        self.rejected[rows, w] |= (log_k >= self.threshold[rows, None]) | impossible

    def _growth_bet(self, rows, w, n, mean_before, var, mu_c, dev, inside) -> np.ndarray:
        """aGRAPA: one signed bet per candidate, truncated to keep the capital positive; the
        running gap shrunk by `prior` pseudo-draws at the candidate's mean."""
        t = (n + 1.0)[:, None]
        gap = (mean_before[:, None] - mu_c) * t / (t + self.prior)
        lam = np.clip(gap / (var[:, None] + gap ** 2),
                      -TRUNCATION / (1.0 - mu_c), TRUNCATION / mu_c)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.log_plus[rows, w] += np.where(inside, np.log1p(lam * dev), 0.0)
        return self.log_plus[rows, w]

    def _hedged_bet(self, rows, w, n, var, mu_c, dev, inside) -> np.ndarray:
        """Half the capital on each side, the same plug-in size for both."""
        t = n + 1.0
        lam = np.sqrt(2.0 * np.log(2.0 / self.alpha[rows]) / (var * t * np.log1p(t)))
        lam_plus = np.minimum(lam[:, None], TRUNCATION / mu_c)
        lam_minus = np.minimum(lam[:, None], TRUNCATION / (1.0 - mu_c))
        with np.errstate(invalid="ignore", divide="ignore"):
            self.log_plus[rows, w] += np.where(inside, np.log1p(lam_plus * dev), 0.0)
            self.log_minus[rows, w] += np.where(inside, np.log1p(-lam_minus * dev), 0.0)
        return np.logaddexp(self.log_plus[rows, w], self.log_minus[rows, w]) - np.log(2.0)

    def _ons_bet(self, rows, w, mu_c, dev, inside) -> np.ndarray:
        """Online Newton step (Cutkosky & Orabona 2018, as in Shekhar & Ramdas 2023): the
        bet chosen before the draw, then a Newton step on the log capital's gradient."""
        lo, hi = -TRUNCATION / (1.0 - mu_c), TRUNCATION / mu_c
        lam = np.clip(self.lam[rows, w], lo, hi)
        step = lam * dev
        with np.errstate(invalid="ignore", divide="ignore"):
            self.log_plus[rows, w] += np.where(inside, np.log1p(step), 0.0)
        grad = dev / (1.0 + step)
        a = self.ons_a[rows, w] + grad ** 2
        self.ons_a[rows, w] = a
        self.lam[rows, w] = np.clip(lam + 2.0 / (2.0 - np.log(3.0)) * grad / a, lo, hi)
        return self.log_plus[rows, w]

    def _mixture_bet(self, rows, w, mu_c, dev, inside) -> np.ndarray:
        """The average capital of constant bets (the fractions MIXTURE_SCALES of the
        largest bet of each sign: diversified Kelly, Waudby-Smith & Ramdas 2024)."""
        scale = np.concatenate([MIXTURE_SCALES, -MIXTURE_SCALES])
        lam = np.where(scale > 0, scale / mu_c[..., None], scale / (1.0 - mu_c[..., None]))
        with np.errstate(invalid="ignore", divide="ignore"):
            self.log_mix[rows, w] += np.where(inside[..., None],
                                           np.log1p(lam * dev[..., None]), 0.0)
        mix = self.log_mix[rows, w]
        top = mix.max(axis=-1)
        return top + np.log(np.mean(np.exp(mix - top[..., None]), axis=-1))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) [K] of each row's pool mean of x: the candidates never rejected,
        widened by a grid step, inside what the draws leave possible."""
        if self.finite:
            feas_lo = self.s / self.n_pool
            feas_hi = (self.s + self.n_pool - self.n) / self.n_pool
        else:
            feas_lo, feas_hi = np.zeros(len(self.n)), np.ones(len(self.n))
        alive = ~self.rejected
        any_alive = alive.any(axis=1)
        first = np.argmax(alive, axis=1)
        last = alive.shape[1] - 1 - np.argmax(alive[:, ::-1], axis=1)
        rows = np.arange(len(self.n_pool))
        top = alive.shape[1] - 1
        # widened to the neighbouring (rejected) candidate: the local step of the grid
        below = np.where(first > 0, self.grid[rows, np.maximum(first - 1, 0)],
                         self.grid[rows, first] - self.step)
        above = np.where(last < top, self.grid[rows, np.minimum(last + 1, top)],
                         self.grid[rows, last] + self.step)
        lo = np.where(any_alive, np.where(self.exact, self.grid[rows, first], below), feas_lo)
        hi = np.where(any_alive, np.where(self.exact, self.grid[rows, last], above), feas_hi)
        return np.maximum(lo, feas_lo), np.minimum(hi, feas_hi)
