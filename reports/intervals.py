"""Intervals on the optimal learning rate: the refined optimum of a loss-vs-LR curve, and bootstrap replicates of it.

A width's optimum is the vertex of the parabola in log2(LR) through the grid's best LR and its two neighbours, or,
where more LRs lie within SPAN octaves of the best (a grid finer than an octave there, such as `search: refine`'s),
the least-squares parabola through all of them (`vertices`): through the nearest three alone, half an octave apart,
the curvature the vertex rests on is a quarter of an octave grid's, and on simulated sweeps the slope's interval
came out 1.3–1.9× as wide as on an octave grid with fewer trials (studies/interval-coverage, power.py). Its
uncertainty comes from one of two bootstraps, named in optima.csv's `interval_method`:

- seeds: the width has at least MIN_SEEDS seeds at its best grid LR. Each replicate draws the sweep's seeds with
  replacement, once for every width and LR of a (parametrization, optimizer): a drawn seed keeps its whole LR curve
  at every width (seeds share data order and init across LRs and widths, so their noise is correlated), and the
  replicate's curve is the mean over the drawn seeds (`seed_adjusted` where they ran different LRs; +inf where a
  drawn seed diverged). An LR none of the drawn seeds ran keeps its full-sample mean. Where an LR has fewer than
  MIN_SEEDS seeds (3 at the optimum, one beside it), a seed draw cannot reach that trial's scatter (a draw without
  its seed keeps its value), so each replicate adds N(0, σ²/n) there (`thin_scatter`; n its seeds, σ the fit noise
  below, which counts the seeds' offsets too and errs wide). With 3 seeds at seed 0's best LR alone the interval
  held the optimum 72–89% of the time without it and 90–100% with it (studies/interval-coverage, --unbalanced).
  A bootstrap over n seeds treats them as the whole population and comes out too narrow; each width's replicates
  are spread around the point estimate by t(n − 1)/z · √(n / (n − 1)) (Student's t over the normal quantile at
  LEVEL: 2.2 for 3 seeds, 1.2 for 8). The interval is the point estimate ± z × the
  replicates' standard deviation, not their percentiles: n seeds have only C(2n − 1, n) distinct resamples (10 for
  3), and the rarest (one seed drawn n times, 1/27 for 3) lie beyond the 5th and 95th percentiles, so percentiles cut
  the tails. On simulated 3-seed sweeps with a known optimum the percentile interval held it 83–86% of the time
  (the slope's, the true slope 86–90%), this one 89–90% (90–94%), and 91–94% (93–96%) with the scatter floor
  below (studies/interval-coverage).
  Nor does a bootstrap over 3 seeds see the noise their own optima did not show: where they agree by chance it
  comes out narrower than their noise allows (on simulated sweeps the intervals narrower than a quarter octave held
  the optimum 20–82% of the time: studies/interval-coverage, --conditional --no-scatter-floor). So each width's
  spread is raised, where it is smaller, to how far the seed × LR scatter measured at that width across the sweep's
  parametrizations moves the optimum: the scatter floor (`seed_lr_scatter`, `scatter_floors`, `with_scatter_floor`).
  Each parametrization whose scatter a step-down F test finds larger than the others' (`scatter_unlike`) is floored
  at its own, the others at their pool without it.
- fit: fewer seeds than that. Each replicate adds N(0, σ²) to every finite point of the seed-mean curve (σ/√n with
  n seeds at that LR) and refits. The interval is the 5th to 95th percentile of the replicates, widened to hold the
  point estimate. Those replicates are confined to the grid (a replicate whose best LR is an end of the grid stays
  there), so a percentile that lands on an end of the grid is open beyond it (`width_interval`): the data allow an
  optimum past that end. Efron's bias-corrected percentiles would read the replicates that equal the point estimate
  (a third or more at an edge) as bias: on simulated single-seed sweeps they held an optimum the noise had
  put on the grid's edge 20–28% of the time on four LRs; this interval holds the optimum 86–100% of the time and
  the slope 98–100%, open in most sweeps (studies/interval-coverage, --edges).
  σ (`fit_noise`) is the seed-to-seed standard deviation measured elsewhere in the sweep (pooled over the cells
  around each width's optimum that have two or more seeds) where there is one; else the residual of a least-squares
  quadratic through the five grid points around each width's optimum (pooled over the sweep; the curve's misfit
  counts as noise, so this errs wide); never less than NOISE_FLOOR. `fit_noise_from` names which one it was
  ("seeds", "residual" or "floor").

A bound (an optimum on the grid's edge) is not a value: its true optimum lies at or beyond that edge by an unknown
amount, and the bootstrap, confined to the grid, cannot see past it. `open_bounds` opens every interval that depends
on a bound on the side the bound could push it (a width's own interval, the slope's, a horizon shift's).

Replicates are seeded by name, so a report is the same every time it is built.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import polars as pl

REPLICATES = 2000      # bootstrap replicates per (parametrization, optimizer, metric)
LEVEL = 0.90           # two-sided interval level
MIN_SEEDS = 3          # seeds a width needs for the seed bootstrap (fewer: the fit bootstrap)
NOISE_FLOOR = 0.01     # nats: the smallest seed noise a single-seed fit is assumed to have
UNLIKE_P = 0.01        # the F test's level at which one group's seed × LR scatter is not the others' (scatter_unlike)
NORMAL = NormalDist()
Z = NORMAL.inv_cdf(1 - (1 - LEVEL) / 2)  # the two-sided LEVEL quantile of the normal: 1.645
WINDOW = 5             # grid points around the optimum for the residual estimate of σ
SPAN = 1.0             # octaves either side of the best grid LR whose LRs the vertex is fitted through (at least its
                       # two neighbours)
ADJUST_ITERATIONS = 500  # backfitting rounds of the seed-adjusted mean at most (small designs converge in tens)


def parabola_vertex(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertex (x*, y*) of the parabola through three points per row: x, y of shape (..., 3), x sorted. NaN where a
    y is not finite, the points are collinear or the parabola opens downwards; x* is clipped to [x0, x2]."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s01 = (y[..., 1] - y[..., 0]) / (x[..., 1] - x[..., 0])
        s12 = (y[..., 2] - y[..., 1]) / (x[..., 2] - x[..., 1])
        a = (s12 - s01) / (x[..., 2] - x[..., 0])  # y = y1 + s01·(x − x1) + a·(x − x0)(x − x1)
        ok = np.isfinite(y).all(-1) & (a > 0)
        xv = np.clip((x[..., 0] + x[..., 1]) / 2 - s01 / (2 * a), x[..., 0], x[..., 2])
        yv = y[..., 1] + s01 * (xv - x[..., 1]) + a * (xv - x[..., 0]) * (xv - x[..., 1])
    return np.where(ok, xv, np.nan), np.where(ok, yv, np.nan)


def window_vertex(x: np.ndarray, y: np.ndarray, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertex (x*, y*) of the least-squares parabola through the points of each row of y (B, L) over x (L,) that
    `window` (B, L) marks (three or more a row). NaN where a marked y is not finite or the parabola opens downwards;
    x* is clipped to the marked points' range."""
    centre = np.where(window, x, 0.0).sum(1) / window.sum(1)  # fitted in x − centre, for conditioning
    u = np.where(window, x[None, :] - centre[:, None], 0.0)
    finite = np.where(window, np.isfinite(y), True).all(1)
    weight = window & np.isfinite(y)
    yw = np.where(weight, y, 0.0)
    powers = np.stack([weight * u ** k for k in range(5)])  # Σ u^k over each row's points, k = 0 … 4
    sums = powers.sum(2)
    normal = np.stack([np.stack([sums[r + c] for c in range(3)], -1) for r in range(3)], -2)  # (B, 3, 3)
    rhs = np.stack([(powers[k] * yw).sum(1) for k in range(3)], -1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        solvable = finite & (np.linalg.det(normal) > 0)
        coef = np.linalg.solve(np.where(solvable[:, None, None], normal, np.eye(3)), rhs[..., None])[..., 0]
        c0, c1, c2 = coef.T
        ok = solvable & (c2 > 0)
        lo, hi = np.where(window, u, np.inf).min(1), np.where(window, u, -np.inf).max(1)
        uv = np.clip(-c1 / (2 * c2), lo, hi)
    return np.where(ok, centre + uv, np.nan), np.where(ok, c0 + c1 * uv + c2 * uv ** 2, np.nan)


@dataclass(frozen=True)
class Vertices:
    """The optimum of each row of a (B, L) loss matrix over sorted log2 LRs x (L,)."""

    index: np.ndarray    # (B,) grid argmin (0 when every LR diverged)
    x: np.ndarray        # (B,) log2 of the refined optimum (the grid argmin where no parabola fits; NaN: none)
    y: np.ndarray        # (B,) loss there
    refined: np.ndarray  # (B,) bool: the parabola refined it
    edge: np.ndarray     # (B,) −1 low edge, +1 high edge (a bound), 0 interior


def vertices(x: np.ndarray, losses: np.ndarray) -> Vertices:
    """Optima of loss curves (+inf: diverged). A single LR counts as the low edge."""
    y = np.atleast_2d(np.asarray(losses, float))
    n = y.shape[1]
    found = np.isfinite(y).any(1)
    i = np.argmin(np.where(np.isfinite(y), y, np.inf), axis=1)
    rows = np.arange(len(y))
    edge = np.where(i == 0, -1, np.where(i == n - 1, 1, 0))
    if n >= 3:
        j = np.clip(i, 1, n - 2)[:, None] + np.arange(-1, 2)
        xv, yv = parabola_vertex(x[j], y[rows[:, None], j])
        window = np.abs(x[None, :] - x[i][:, None]) <= SPAN + 1e-9
        window[rows[:, None], j] = True
        wide = window.sum(1) > 3  # more LRs within SPAN of the best than its two neighbours
        if wide.any():
            xw, yw = window_vertex(x, y[wide], window[wide])
            xv[wide], yv[wide] = xw, yw
    else:
        xv = yv = np.full(len(y), np.nan)
    refined = found & (edge == 0) & np.isfinite(xv)
    grid_x = np.where(found, x[i], np.nan)
    return Vertices(i, np.where(refined, xv, grid_x), np.where(refined, yv, y[rows, i]), refined,
                    np.where(found, edge, 0))


def slope_weights(log2_widths: np.ndarray) -> np.ndarray:
    """w (W,) with w · log2 optima = the least-squares slope of log2 optimum against log2 width."""
    x = np.asarray(log2_widths, float)
    return (x - x.mean()) / np.sum((x - x.mean()) ** 2)


def interval(replicates: np.ndarray, point: np.ndarray | float,
             method: str | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The LEVEL interval of bootstrap replicates (B,) or (B, W) around the point estimate (scalar or (W,)), by the
    method that made each column's replicates ("seeds" | "fit": one, or one per column). seeds: the point ± z × the
    replicates' standard deviation (the module docstring says why not percentiles). fit: the replicates' 5th to 95th
    percentile, widened to hold the point. NaN replicates are ignored; NaN where none is left."""
    values = np.asarray(replicates, float)
    shape = values.shape[1:]
    points = np.broadcast_to(np.asarray(point, float), shape).reshape(-1)
    methods = [method] * len(points) if isinstance(method, str) else list(method)
    bounds = []
    for column, p, how in zip(values.reshape(len(values), -1).T, points, methods, strict=True):
        v = column[~np.isnan(column)]
        if not len(v) or np.isnan(p):
            bounds.append((np.nan, np.nan))
        elif how == "seeds":
            bounds.append((p - Z * v.std(), p + Z * v.std()))
        else:
            lo, hi = np.percentile(v, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
            bounds.append((min(lo, p), max(hi, p)))
    lo, hi = np.array(bounds).reshape(-1, 2).T
    return lo.reshape(shape), hi.reshape(shape)


def width_interval(lo: float, hi: float, edge: str | None, width: Width) -> tuple[float, float]:
    """A width's interval [lo, hi] (log2 LR, from `interval`), open (∓inf) on its bound's side (edge: 'low',
    'high' or None) and closed no nearer the bound than halfway to its neighbour LR (where every replicate sits on the
    bound, their spread is 0; a best LR at an end says no more than that a symmetric bowl's optimum lies beyond that
    halfway point); for a fit interval, also open on each side that reaches an end of the width's LRs: at least 5%
    of its replicates sit there, and those are bounds."""
    lo, hi = open_bounds(lo, hi, [1.0], [edge])
    x = np.sort(width.x)
    if edge == "low" and len(x) > 1:
        hi = max(hi, (x[0] + x[1]) / 2)
    if edge == "high" and len(x) > 1:
        lo = min(lo, (x[-2] + x[-1]) / 2)
    if width.method == "fit":
        lo = -math.inf if lo <= width.x.min() + 1e-9 else lo
        hi = math.inf if hi >= width.x.max() - 1e-9 else hi
    return lo, hi


def open_bounds(lo: float, hi: float, coefficients: Sequence[float],
                edges: Sequence[str | None]) -> tuple[float, float]:
    """The interval [lo, hi] of a linear statistic Σ c_k · x_k of log2 optima x_k, opened (to ∓inf) on each side
    a bound could push it: x_k of a 'low' bound may be lower still, of a 'high' one higher (edges: 'low', 'high'
    or None per k)."""
    for c, edge in zip(coefficients, edges):
        if edge is None or abs(c) < 1e-12:
            continue
        if c * (1 if edge == "high" else -1) > 0:
            hi = math.inf
        else:
            lo = -math.inf
    return lo, hi


def rng(*names: str) -> np.random.Generator:
    """A generator seeded by names (parametrization, optimizer, …): the same replicates every time."""
    return np.random.default_rng(zlib.crc32("/".join(names).encode()))


@dataclass(frozen=True)
class Width:
    """One width's measurements: log2 LRs (L,), per-seed losses (S, L) over the group's seeds (NaN: not run,
    +inf: diverged), the full-sample seed-mean curve (L,), and how its interval is made."""

    x: np.ndarray
    per_seed: np.ndarray
    curve: np.ndarray
    seeds_per_lr: np.ndarray  # (L,) seeds that finished at each LR
    n_seeds: int  # seeds at the best grid LR
    method: str   # "seeds" (n_seeds ≥ MIN_SEEDS) | "fit"
    scatter_floor: tuple[float, int] = (0.0, 0)  # (σ nats, dof): the sweep's seed × LR scatter at this width


def seed_lr_scatter(per_seed: np.ndarray, curve: np.ndarray) -> tuple[float, int]:
    """(sum of squares in nats², degrees of freedom) of the seed × LR interaction at the best LR of the seed-mean
    curve (L,) and its two neighbours: what is left of each finite trial of per_seed (S, L) once its LR's
    seed-adjusted mean and its seed's offset are taken out. The seeds' own offsets move no optimum; this scatter
    does. Seeds with fewer than two of those LRs, and LRs with fewer than two seeds, add nothing; (0.0, 0) where
    nothing is left."""
    if not np.isfinite(curve).any():
        return 0.0, 0
    i = int(np.argmin(np.where(np.isfinite(curve), curve, np.inf)))
    y = per_seed[:, max(0, i - 1):i + 2]
    y = np.where(np.isfinite(y), y, np.nan)
    for _ in range(2):  # after dropping thin seeds an LR may turn thin, and once more the other way round
        y = y[(~np.isnan(y)).sum(1) >= 2]
        y = y[:, (~np.isnan(y)).sum(0) >= 2]
    cells = int((~np.isnan(y)).sum())
    dof = cells - y.shape[0] - y.shape[1] + 1
    if min(y.shape) < 2 or dof <= 0:
        return 0.0, 0
    mu = seed_adjusted(y, np.ones((1, y.shape[0])))[0]
    offset = np.nanmean(y - mu, axis=1, keepdims=True)
    return float(np.nansum((y - mu - offset) ** 2)), dof


def student_t(dof: int, level: float = LEVEL) -> float:
    """The two-sided `level` quantile of Student's t with `dof` degrees of freedom (Cornish-Fisher expansion; within
    1.5% at dof 2, closer above)."""
    z = NORMAL.inv_cdf(1 - (1 - level) / 2)
    return (z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * dof ** 3))


def mean_interval(d: np.ndarray) -> tuple[float, float | None, float | None]:
    """The mean of paired differences d (n,) and its LEVEL interval, Student's t over them (None below 2)."""
    mean = float(d.mean())
    if len(d) < 2:
        return mean, None, None
    half = student_t(len(d) - 1) * float(d.std(ddof=1)) / math.sqrt(len(d))
    return mean, mean - half, mean + half


def seed_batch_interval(d: np.ndarray) -> tuple[float, float | None, float | None]:
    """The mean of paired differences d [S seeds, B validation batches] (each seed's a − b on each batch) and its
    LEVEL interval with the batches a sample too. Every trial is evaluated on the same batches, so their sampling
    error is common to the seeds, and a t over the seeds' means leaves it out. Two-way random effects without
    replication: Var(mean) = (MS_seed + MS_batch − MS_resid) / (S·B), Student's t with Satterthwaite's degrees of
    freedom; where the batches show no variance of their own (MS_batch ≤ MS_resid) it is mean_interval over the
    seeds' means. None below 2 seeds or 2 batches."""
    seeds, batches = d.shape
    mean = float(d.mean())
    if seeds < 2 or batches < 2:
        return mean, None, None
    by_seed, by_batch = d.mean(axis=1), d.mean(axis=0)
    ms_seed = batches * float(((by_seed - mean) ** 2).sum()) / (seeds - 1)
    ms_batch = seeds * float(((by_batch - mean) ** 2).sum()) / (batches - 1)
    resid = d - by_seed[:, None] - by_batch[None, :] + mean
    ms_resid = float((resid ** 2).sum()) / ((seeds - 1) * (batches - 1))
    if ms_batch <= ms_resid:
        return mean_interval(by_seed)
    total = ms_seed + ms_batch - ms_resid
    dof = total ** 2 / (ms_seed ** 2 / (seeds - 1) + ms_batch ** 2 / (batches - 1)
                        + ms_resid ** 2 / ((seeds - 1) * (batches - 1)))
    half = student_t(dof) * math.sqrt(total / (seeds * batches))
    return mean, mean - half, mean + half


def small_sample_factor(n: int) -> float:
    """How much wider than a bootstrap over n seeds the interval of their mean is: t(n − 1)/z · √(n / (n − 1))."""
    return student_t(n - 1) / Z * np.sqrt(n / (n - 1))


def seed_adjusted(per_seed: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Seed-adjusted mean curves (B, L) of per-seed losses (S, L) (NaN: not run, +inf: diverged) under seed weights
    (B, S) (bootstrap draw counts; ones for the sample): the weighted least-squares fit of loss = μ_lr + δ_seed to
    the finite cells, with Σ weight · δ = 0. A seed's luck is shared by all its LRs (data order and init), so where
    seeds ran different LRs a plain mean compares one seed's luck with another's; the fit removes each seed's offset,
    measured on the LRs it shares with the others (seeds that share no LR with the rest are not identified: one of the
    least-squares solutions). With every seed at every LR this is the plain mean. +inf where a weighted seed
    diverged; NaN where no weighted seed ran the LR."""
    weights = np.atleast_2d(np.asarray(weights, float))
    ran = ~np.isnan(per_seed)
    finite = np.isfinite(per_seed)
    fit = weights[:, :, None] * finite                            # (B, S, L)
    fy = fit * np.where(finite, per_seed, 0.0)
    per_lr, per_seed_w = fit.sum(1), fit.sum(2)                   # (B, L), (B, S)
    fy_lr, fy_seed = fy.sum(1), fy.sum(2)                         # (B, L), (B, S)
    share = weights / weights.sum(1, keepdims=True)
    delta = np.zeros(per_seed_w.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        for _ in range(ADJUST_ITERATIONS):  # backfitting: converges for any design, geometrically
            mu = (fy_lr - (delta[:, None, :] @ fit)[:, 0]) / per_lr
            step = np.where(per_seed_w > 0, (fy_seed - (fit @ np.nan_to_num(mu)[:, :, None])[..., 0]) / per_seed_w,
                            0.0)
            step -= (share * step).sum(1, keepdims=True)
            done = np.abs(step - delta).max() < 1e-12
            delta = step
            if done:
                break
        mu = (fy_lr - (delta[:, None, :] @ fit)[:, 0]) / per_lr
    mu = np.where(per_lr > 0, mu, np.nan)
    return np.where((weights @ (ran & ~finite)) > 0, np.inf, mu)


def unbalanced(per_seed: np.ndarray) -> bool:
    """Whether some seed that ran at this width left out an LR another seed ran: only then does the seed-adjusted
    mean differ from the plain one."""
    ran = ~np.isnan(per_seed)
    cells = ran[ran.any(1)][:, ran.any(0)]  # the seeds and LRs that ran anything
    return bool(cells.size and not cells.all())


def seed_means(per_seed: np.ndarray, counts: np.ndarray, curve: np.ndarray) -> np.ndarray:
    """Replicate curves (B, L) from seed draw counts (B, S): the mean over drawn seeds (seed-adjusted where the
    seeds ran different LRs: `seed_adjusted`), +inf where a drawn seed diverged, the full-sample curve where no drawn
    seed ran that LR."""
    ran = ~np.isnan(per_seed)
    drawn = counts @ ran
    if unbalanced(per_seed):
        mean = seed_adjusted(per_seed, counts)
    else:
        value = np.where(np.isfinite(per_seed), per_seed, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = (counts @ value) / drawn
        mean = np.where((counts @ np.isinf(per_seed)) > 0, np.inf, mean)
    return np.where(drawn > 0, mean, curve)


def thin_scatter(width: Width, noise: float) -> np.ndarray:
    """(L,) the trial scatter σ/√n a seed bootstrap adds at each LR fewer than MIN_SEEDS seeds ran (0 elsewhere)."""
    return np.where(width.seeds_per_lr < MIN_SEEDS, noise / np.sqrt(width.seeds_per_lr), 0.0)


def replicate_optima(widths: list[Width], noise: float, draws: np.random.Generator,
                     jitter: np.random.Generator) -> np.ndarray:
    """(B, W) log2 optimum of each width in REPLICATES bootstrap replicates. `draws` picks seeds (shared by every
    width: a seed is one unit), `jitter` the fit noise (σ = `noise`) of single-seed widths and of LRs fewer seeds
    ran."""
    n_seeds = widths[0].per_seed.shape[0] if widths else 0
    counts = draws.multinomial(n_seeds, np.full(n_seeds, 1 / n_seeds), size=REPLICATES).astype(float)
    out = np.empty((REPLICATES, len(widths)))
    for k, w in enumerate(widths):
        if w.method == "seeds":
            point, factor = vertices(w.x, w.curve).x[0], small_sample_factor(w.n_seeds)
            curves = seed_means(w.per_seed, counts, w.curve)
            scale = thin_scatter(w, noise) / factor  # ÷ factor: the replicates are spread by it below
            if scale.any():
                curves = curves + scale * jitter.standard_normal(curves.shape)
            out[:, k] = point + factor * (vertices(w.x, curves).x - point)
        else:
            curves = w.curve + noise / np.sqrt(w.seeds_per_lr) * jitter.standard_normal((REPLICATES, len(w.curve)))
            out[:, k] = vertices(w.x, np.where(np.isfinite(w.curve), curves, w.curve)).x
    return out


Floors = dict[tuple[str, str, int], tuple[float, int]]  # (parametrization, optimizer, width) → (value, dof)


def scatter_floors(own: Floors) -> Floors:
    """Each (parametrization, optimizer, model width)'s scatter floor (σ nats, degrees of freedom) from every group's
    own `seed_lr_scatter` piece there (sum of squares, dof): the pieces of all the groups at that width pooled, but
    where the F test names groups that scatter more than the others (`scatter_unlike`), each such group's floor
    is its own scatter and the others' their pool without them (studies/interval-coverage: a pool with one group
    seven times noisier held the others' optima every time and called a drift of +0.35 in 12% of sweeps instead of
    89%; apart, 95% and 88%, and the noisy group's own 94% instead of 91%)."""
    floors = {}
    for width in {key[2] for key in own}:  # pooled across the groups, not the widths: scatter grows with width
        at = {key: piece for key, piece in own.items() if key[2] == width}
        pieces = {f"{p}/{o}": pooled_sigma([piece]) for (p, o, _), piece in at.items()}
        named = {u.group for u in scatter_unlike(pieces)}
        apart = {key for key in at if f"{key[0]}/{key[1]}" in named}
        pool = pooled_sigma(piece for key, piece in at.items() if key not in apart)
        floors |= {key: pooled_sigma([at[key]]) if key in apart else pool for key in at}
    return floors


def pooled_sigma(pieces: Iterable[tuple[float, int]]) -> tuple[float, int]:
    """(σ, dof) of (sum of squares, dof) pieces pooled; (0.0, 0) without degrees of freedom."""
    pieces = list(pieces)
    dof = sum(d for _, d in pieces)
    return (float(np.sqrt(sum(s for s, _ in pieces) / dof)), dof) if dof else (0.0, 0)


@dataclass(frozen=True)
class Unlike:
    """A group whose seed × LR scatter at one width is larger than the other groups' pooled: an F test of its
    variance against theirs (one-sided, Bonferroni over the groups), which the pooled scatter floor assumes away."""
    group: str
    sigma: float       # nats, the group's own
    dof: int
    rest_sigma: float  # nats, the other groups' pooled
    rest_dof: int
    f: float
    p: float


def scatter_unlike(groups: dict[str, tuple[float, int]], level: float = UNLIKE_P) -> list[Unlike]:
    """Of the groups at one width ({name: (σ nats, dof)}), those whose seed × LR scatter is larger than the rest's
    pooled, step by step (Holm's step-down): the group with the largest σ against the others pooled (one-sided F
    test, its p times the number of groups that had a chance to be the largest); where it is named it leaves the
    pool, and the next largest is tested against the groups left, until one is not named or fewer than two with
    degrees of freedom remain. Each p is the largest so far (Holm's adjusted p). [] where none is named."""
    have = {g: sd for g, sd in groups.items() if sd[1] > 0}
    named: list[Unlike] = []
    while len(have) >= 2:
        top = max(have, key=lambda g: have[g][0])
        sigma, dof = have[top]
        rest_sigma, rest_dof = pooled_sigma((s ** 2 * d, d) for g, (s, d) in have.items() if g != top)
        if rest_sigma == 0.0:
            break
        f = (sigma / rest_sigma) ** 2
        p = max([min(1.0, f_survival(f, dof, rest_dof) * len(have))] + [u.p for u in named])  # Bonferroni; Holm
        if p >= level:
            break
        named.append(Unlike(top, sigma, dof, rest_sigma, rest_dof, f, p))
        del have[top]
    return named


def f_survival(f: float, d1: int, d2: int) -> float:
    """P(F > f) for Snedecor's F with (d1, d2) degrees of freedom: I_x(d2/2, d1/2) at x = d2 / (d2 + d1 f)."""
    return _incomplete_beta(d2 / (d2 + d1 * f), d2 / 2, d1 / 2) if f > 0 else 1.0


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Lentz's continued fraction, to 1e-12)."""
    if x <= 0.0 or x >= 1.0:
        return float(x >= 1.0)
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast below the mean
        return 1.0 - _incomplete_beta(1.0 - x, b, a)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300

    def nonzero(v: float) -> float:
        return v if abs(v) > tiny else tiny
    c, d = 1.0, 1.0 / nonzero(1.0 - (a + b) * x / (a + 1))
    value = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 / nonzero(1.0 + num * d)
            c = nonzero(1.0 + num / c)
            value *= c * d
        if abs(c * d - 1.0) < 1e-12:
            break
    return front * value


def with_scatter_floor(widths: list[Width], replicates: np.ndarray,
                       jitter: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Replicates (B, W) of `replicate_optima` with each seed-bootstrap width's spread raised, where it is smaller,
    to how far the sweep's seed × LR scatter at that width (`Width.scatter_floor`: σ, dof) moves the optimum of this
    many seeds: the spread of vertices of the seed-mean curve plus N(0, σ²/n) at each LR (n its seeds), × t(dof)/z for a
    σ measured on dof degrees of freedom. Three seeds whose optima agree by chance give a seed bootstrap narrower
    than their noise allows (studies/interval-coverage, --conditional); the scatter pooled over the sweep's groups
    is measured on more trials. The variance missing is the seed × LR scatter those seeds happened not to show,
    which no other width shares: a raised width keeps its seed replicates (and their covariance with the other
    widths, which the slope reads) and adds the floor's own replicates, scaled to make up the difference. Also (W,)
    bool: where the floor set the spread."""
    out, raised = replicates.copy(), np.zeros(len(widths), bool)
    for k, w in enumerate(widths):
        sigma, dof = w.scatter_floor
        if w.method != "seeds" or not sigma or not dof:
            continue
        point = vertices(w.x, w.curve).x[0]
        finite = np.isfinite(w.curve)
        scatter = sigma / np.sqrt(w.seeds_per_lr) * jitter.standard_normal((len(out), len(w.curve)))
        floor = (vertices(w.x, np.where(finite, w.curve + scatter, w.curve)).x - point) * student_t(dof) / Z
        seed = out[:, k] - point
        floor_sd, seed_sd = np.nanstd(floor), np.nanstd(seed)
        if floor_sd > seed_sd:
            out[:, k] = point + seed + floor * np.sqrt(1 - (seed_sd / floor_sd) ** 2)
            raised[k] = True
    return out, raised


def fit_noise(losses: pl.DataFrame, curves: pl.DataFrame, keys: list[str]) -> tuple[float, str]:
    """(σ in nats, where it came from: "seeds" | "residual" | "floor") for single-seed widths; see the module
    docstring. `losses`: one row per finished trial (keys, lr, loss); `curves`: lr_curves' seed means."""
    seeds, residual = [], []
    trial = losses.filter(pl.col("loss").is_finite())
    for key, g in curves.filter(pl.col("n_seeds") > 0).sort([*keys, "lr"]).group_by(keys, maintain_order=True):
        x, y = np.log2(g["lr"].to_numpy()), g["loss"].to_numpy().astype(float)
        if not np.isfinite(y).any():
            continue
        i = int(np.argmin(np.where(np.isfinite(y), y, np.inf)))
        near = g["lr"][max(0, i - 1):i + 2].to_list()
        cells = trial.filter(pl.all_horizontal(pl.col(k) == v for k, v in zip(keys, key)) & pl.col("lr").is_in(near))
        for _, c in cells.sort("lr").group_by("lr", maintain_order=True):
            if len(c) >= 2:
                seeds.append((float(c["loss"].var(ddof=1)) * (len(c) - 1), len(c) - 1))
        lo = max(0, min(i - WINDOW // 2, len(x) - WINDOW))
        xs, ys = x[lo:lo + WINDOW], y[lo:lo + WINDOW]
        xs, ys = xs[np.isfinite(ys)], ys[np.isfinite(ys)]
        if len(xs) >= 4:
            r = ys - np.polyval(np.polyfit(xs, ys, 2), xs)
            residual.append((float(np.sum(r ** 2)), len(xs) - 3))
    parts, name = (seeds, "seeds") if seeds else (residual, "residual")
    dof = sum(d for _, d in parts)
    sigma = float(np.sqrt(sum(s for s, _ in parts) / dof)) if dof else 0.0
    return (sigma, name) if sigma > NOISE_FLOOR else (NOISE_FLOOR, "floor")
