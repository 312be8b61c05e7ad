"""The paragraph at the top of a report and of summary.md, written from the analysis: the verdict per
parametrization with its intervals, the budget it was measured at, where other metrics or an earlier horizon
disagree, and what would change it. Plain text (no markup): the page escapes it, Markdown shows it as it is.
"""
from __future__ import annotations

import math

import polars as pl

from deltamup.reports.analysis import Analysis
from deltamup.reports.intervals import MIN_SEEDS, UNLIKE_P, scatter_unlike, small_sample_factor
from deltamup.reports.verdict import TOLERANCE, suggestion

NOISE_FROM = {"seeds": "the seeds this sweep has elsewhere", "residual": "the residual of a quadratic fit around each "
              "optimum", "floor": "the default floor"}


def interval(value: float | None, lo: float | None, hi: float | None, signed: bool = True) -> str:
    """'+0.05 [−0.18, +0.25]' (signed) or '0.13 [0.00, 0.88]'; an end opened by a bound shows as ∞:
    '−0.23 (−∞, −0.05]'; '–' without a value."""
    if value is None:
        return "–"
    fmt = "{:+.2f}" if signed else "{:.2f}"
    if lo is None or hi is None:
        return fmt.format(value)
    left = "(−∞" if lo == -math.inf else f"[{fmt.format(lo)}"
    right = ("+∞)" if signed else "∞)") if hi == math.inf else f"{fmt.format(hi)}]"
    return f"{fmt.format(value)} {left}, {right}"


def lr_interval(lo: float | None, hi: float | None, digits: int = 2) -> str:
    """'[0.0012, 0.0036]' for an LR's interval; a bound's open end: '[0.0039, ∞)', '(0, 0.002]'; '' without one."""
    if lo is None or hi is None:
        return ""
    fmt = f"{{:.{digits}g}}"
    return (f"{'(0' if lo == 0 else '[' + fmt.format(lo)}, "
            f"{'∞)' if hi == math.inf else fmt.format(hi) + ']'}")


def budget_text(a: Analysis) -> str:
    """'300 steps, 4.9M tokens per trial, depth 4, widths 256–1536, 1.1 → 0.032 tokens per parameter' (the last
    where the trial records hold their parameter counts)."""
    b, widths = a.budget, sorted(a.optima["width"].unique().to_list())
    parts = []
    if b.get("steps"):
        parts.append(f"{b['steps']} steps, {b['tokens_per_trial'] / 1e6:.3g}M tokens per trial, depth {b['depth']}")
    if widths:
        parts.append(f"widths {widths[0]}–{widths[-1]}" if len(widths) > 1 else f"width {widths[0]}")
        ratio = tokens_per_parameter(a, [widths[0], widths[-1]]) if b.get("tokens_per_trial") else []
        if ratio:
            parts.append(f"{' → '.join(f'{r:.2g}' for r in ratio)} tokens per parameter")
    return ", ".join(parts)


def tokens_per_parameter(a: Analysis, widths: list[int]) -> list[float]:
    """A trial's tokens over its model's parameters at each of `widths` (the median over the trials that record
    `params`); [] where a width has none."""
    trials = a.sweep.trials
    if "params" not in trials.columns:
        return []
    out = []
    for width in dict.fromkeys(widths):
        params = trials.filter((pl.col("width") == width) & pl.col("params").is_not_null())["params"]
        if params.is_empty():
            return []
        out.append(a.budget["tokens_per_trial"] / float(params.median()))
    return out


def verdict_line(t: dict) -> str:
    """'sp/adamw undetermined (fit-based interval; it suggests a drift): slope −0.66 [−1.05, −0.26], spread 1.65
    [0.30, 3.15] octaves, 1 seed'."""
    seeds = f"{t['n_seeds']} seed{'s' * (t['n_seeds'] != 1)}"
    hint = suggestion(t["slope_lo"], t["slope_hi"]) if t["interval_method"] == "fit" else None
    hint = f" (fit-based interval; it suggests {hint})" if hint else ""
    return (f"{t['parametrization']}/{t['optimizer']} {t['verdict']}{hint}: slope "
            f"{interval(t['slope'], t['slope_lo'], t['slope_hi'])}, spread "
            f"{interval(t['spread_octaves'], t['spread_lo'], t['spread_hi'], signed=False)} octaves, {seeds}")


def disagreements(a: Analysis) -> list[str]:
    """Where another metric (or an earlier horizon) reaches another verdict than the headline metric."""
    main = {(t["parametrization"], t["optimizer"]): t["verdict"] for t in a.transfer.iter_rows(named=True)}
    out = []
    for t in a.verdicts.filter(pl.col("metric") != a.metric).iter_rows(named=True):
        mine = main.get((t["parametrization"], t["optimizer"]))
        if mine is not None and t["verdict"] != mine:
            out.append(f"under {t['metric']}, {t['parametrization']}/{t['optimizer']} {t['verdict']} (slope "
                       f"{interval(t['slope'], t['slope_lo'], t['slope_hi'])}) where {a.metric} says {mine}")
    return out


def still_moving(a: Analysis) -> list[str]:
    """'gdn-mup/adamw at widths 512, 1536 (+0.31 to +0.60 octave from 50% to 100% of the steps)' per parametrization
    and optimizer with a width whose optimum still moves at the last horizon."""
    if a.horizon.is_empty():
        return []
    before, last = sorted(a.horizon["horizon"].unique().to_list())[-2:]
    moving = a.horizon.filter((pl.col("horizon") == last) & (pl.col("still_moving") == "moving"))
    out = []
    for (p, o), g in moving.sort("parametrization", "optimizer", "width").group_by(["parametrization", "optimizer"],
                                                                                  maintain_order=True):
        shifts = sorted(g["shift_octaves"].to_list(), key=abs)
        size = f"{shifts[0]:+.2f}" if len(shifts) == 1 else f"{shifts[0]:+.2f} to {shifts[-1]:+.2f}"
        widths = ", ".join(map(str, g["width"]))
        out.append(f"{p}/{o} at width{'s' * (len(g) > 1)} {widths} ({size} octave from {before}% to {last}% of the "
                   "steps)")
    return out


MAX_SEEDS = 64   # the most seeds seeds_for_a_verdict names
SEED_GAMMA = 0.5  # a slope interval's width at n seeds ∝ small_sample_factor(n)^γ / √n (seeds_for_a_verdict)


def narrowing(n: int, seeds: int) -> float:
    """How much narrower a slope interval is at n seeds than at `seeds`: small_sample_factor^γ/√n at n over the
    same at `seeds`. γ = 1 is the seed bootstrap's own factor, γ = 0 plain 1/√n; on simulated sweeps at three noise
    levels the report's intervals narrowed from 3 seeds to 5 and 8 by 0.61 and 0.43–0.46 (studies/interval-coverage,
    power.md), which γ = 0.5 gives (0.63, 0.46): the scatter floor narrows more slowly than the bootstrap."""
    def at(k: int) -> float:
        return small_sample_factor(k) ** SEED_GAMMA / math.sqrt(k)
    return at(n) / at(seeds)


def seeds_for_a_verdict(slope: float, width: float, seeds: int) -> str:
    """How many seeds would give a verdict if the slope stayed where it is and its interval (`width` octaves per
    octave of width at `seeds` seeds) narrowed as `narrowing` says: the nearer of `transfers` (inside ±TOLERANCE)
    and `drifts` (excluding 0). On simulated sweeps a finer LR grid narrowed the interval less than seeds did."""
    room = {"transfers": TOLERANCE - abs(slope), "drifts": abs(slope)}
    verdict = max(room, key=room.get)
    for n in range(seeds + 1, MAX_SEEDS + 1):
        if width / 2 * narrowing(n, seeds) < room[verdict]:
            return f"about {n} seeds for `{verdict}` if the slope stays at {slope:+.2f}"
    return f"more than {MAX_SEEDS} seeds with the slope at {slope:+.2f}"


def what_would_change_it(a: Analysis) -> list[str]:
    """The concrete things that could turn each undetermined verdict into a confident one (or overturn one)."""
    t = a.transfer
    out = []
    fit = t.filter(pl.col("interval_method") == "fit")
    if not fit.is_empty():
        noise = a.optima.filter(pl.col("fit_noise").is_not_null())
        sigma = (f" (σ = {noise['fit_noise'][0]:.3g} nats, from {NOISE_FROM[noise['fit_noise_from'][0]]})"
                 if not noise.is_empty() else "")
        out.append(f"at least {MIN_SEEDS} seeds per width (spec: seeds: [0, 1, 2]): with fewer, the intervals assume "
                   f"a noise level{sigma} instead of measuring it, and no verdict is confident")
    wide = t.filter((pl.col("verdict") == "undetermined") & (pl.col("interval_method") == "seeds")
                    & (pl.col("n_bound") == 0) & pl.col("slope_lo").is_not_null())
    for r in wide.iter_rows(named=True):
        width = r["slope_hi"] - r["slope_lo"]
        out.append(f"more seeds for {r['parametrization']}/{r['optimizer']} (its slope interval is {width:.2f} wide "
                   f"at {r['n_seeds']} seeds; transfers needs it inside ±{TOLERANCE:g}): "
                   f"{seeds_for_a_verdict(r['slope'], width, r['n_seeds'])}")
    bounds = a.optima.filter(pl.col("bound"))
    if not bounds.is_empty():
        where = ", ".join(f"{r['parametrization']}/{r['optimizer']} @{r['width']} ({r['edge']})"
                          for r in bounds.iter_rows(named=True))
        out.append(f"a wider LR grid where the optimum is on its edge: {where}")
    few = t.filter(pl.col("widths") < 2)
    if not few.is_empty():
        names = ", ".join(f"{p}/{o}" for p, o in few.select("parametrization", "optimizer").iter_rows())
        out.append(f"a second width with an optimum for {names}")
    moving = still_moving(a)
    if moving:
        out.append(f"a longer budget: the optimum still moves with the horizon at {', '.join(moving)}")
    if not out:
        out.append("only another budget (longer training, other widths or depth): at this one the intervals are "
                   "measured over seeds and the verdicts are confident")
    return out


def scatter_floored(a: Analysis) -> str | None:
    """'gdn-mup/adamw @256, sp/adamw @1024': the widths whose seed interval the scatter floor set (their seeds agreed
    more than the seed × LR scatter at that width allows); None where it set none."""
    raised = a.optima.filter(pl.col("scatter_floored").fill_null(False)).sort("parametrization", "optimizer", "width")
    return ", ".join(f"{r['parametrization']}/{r['optimizer']} @{r['width']}"
                     for r in raised.iter_rows(named=True)) or None


def scatters_unlike(a: Analysis) -> list[str]:
    """'@2048: mup/adamw 0.024 nats against the others' 0.0033 (F = 52.5 on 4 and 8 degrees of freedom, p = 3e-05)':
    each group, by width, whose seed × LR scatter is larger than the other groups' pooled (the step-down F test of
    intervals.scatter_unlike), whose scatter floors are therefore set apart (intervals.scatter_floors)."""
    out = []
    rows = a.optima.filter(pl.col("scatter_own_dof").is_not_null())
    for (width,), at in rows.sort("width").group_by("width", maintain_order=True):
        for unlike in scatter_unlike({f"{r['parametrization']}/{r['optimizer']}": (r["scatter_own"],
                                                                                    r["scatter_own_dof"])
                                      for r in at.iter_rows(named=True)}):
            out.append(f"@{width}: {unlike.group} {unlike.sigma:.2g} nats against the others' "
                       f"{unlike.rest_sigma:.2g} (F = {unlike.f:.3g} on {unlike.dof} and {unlike.rest_dof} degrees of "
                       f"freedom, p = {unlike.p:.1g})")
    return out


def interpretation(a: Analysis) -> str:
    """One paragraph: verdicts with intervals, budget, disagreements, what would change it."""
    if a.transfer.is_empty():
        return "No verdict yet: no width has a finished trial."
    lines = "; ".join(verdict_line(t) for t in a.transfer.sort("optimizer", "parametrization").iter_rows(named=True))
    text = (f"Verdict on {a.metric}, 90% intervals ({budget_text(a)}): {lines}. Slope: octaves of optimal LR per "
            f"octave of width; transfers means its interval lies inside ±{TOLERANCE:g}, drifts that it excludes 0.")
    floored = scatter_floored(a)
    if floored:
        text += (f" The seeds' own spread was narrower than the seed × LR scatter at their width allows, so that "
                 f"scatter sets the interval (docs/verdicts.md, the scatter floor) at: {floored}.")
    unlike = scatters_unlike(a)
    if unlike:
        text += (f" At these widths a parametrization's seeds scatter more than the others' (F test, Holm's "
                 f"step-down over the parametrizations there, p < {UNLIKE_P:g}), so its intervals' floor is its own "
                 f"scatter and the others' their pool without it: {'; '.join(unlike)}.")
    other = disagreements(a)
    if other:
        text += f" Other metrics disagree: {'; '.join(other)}."
    return text + f" What would change it: {'; '.join(what_would_change_it(a))}."
