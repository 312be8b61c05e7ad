"""The transfer verdict of a (parametrization, optimizer): read from the 90% interval of the slope of log2(optimal LR)
against log2(width), in octaves of optimum per octave of width (0: the LR transfers; SP under AdamW: about −1).

- transfers     the interval lies inside ±TOLERANCE, every width's interval is a seed bootstrap (at least
                MIN_SEEDS seeds at its optimum), and no optimum is a bound (grid edge);
- drifts        the interval excludes 0 and does not lie inside ±TOLERANCE, and no bound could undo that (each
                bound's true optimum lies beyond the grid edge, which may only steepen the drift);
- undetermined  everything else, and fewer than two widths with an optimum.

A fit-based interval (fewer seeds) assumes its noise level instead of measuring it: it can show a drift much larger
than that noise, but never `transfers`. The same rule reads the shift of a width's optimum between two horizons
(`classify`): settled (inside ±TOLERANCE octave), moving (excludes 0, not inside), unclear.
"""
from __future__ import annotations

import numpy as np

from .intervals import MIN_SEEDS

TOLERANCE = 0.25  # octaves of optimum per octave of width (a horizon shift: octaves)
VERDICTS = ("transfers", "drifts", "undetermined")


def classify(lo: float | None, hi: float | None, tolerance: float = TOLERANCE) -> str:
    """'inside' (the interval lies inside ±tolerance), 'excludes_zero' (it does not, and excludes 0) or 'unclear'."""
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return "unclear"
    if -tolerance <= lo and hi <= tolerance:
        return "inside"
    return "excludes_zero" if lo > 0 or hi < 0 else "unclear"


def bounds_agree(log2_widths: np.ndarray, edges: list[str | None], direction: float) -> bool:
    """Whether moving each bound's optimum beyond its grid edge (lower for 'low', higher for 'high') can only push
    the least-squares slope further in `direction` (its sign)."""
    weight = log2_widths - log2_widths.mean()  # ∂slope/∂(log2 optimum at that width), up to a positive factor
    for w, edge in zip(weight, edges):
        if edge is None or w == 0:
            continue
        push = -np.sign(w) if edge == "low" else np.sign(w)
        if push != np.sign(direction):
            return False
    return True


def verdict(slope_lo: float | None, slope_hi: float | None, n_seeds: int, method: str, log2_widths: np.ndarray,
            edges: list[str | None], fit_noise: float | None = None) -> tuple[str, str]:
    """(verdict, the reason in a few words) from the slope's interval; see the module docstring."""
    if len(log2_widths) < 2 or slope_lo is None:
        return "undetermined", "fewer than two widths with an optimum"
    where = classify(slope_lo, slope_hi)
    bounds = [f"{2 ** x:.0f} ({e} edge)" for x, e in zip(log2_widths, edges) if e]
    if where == "excludes_zero":
        if bounds_agree(log2_widths, edges, (slope_lo + slope_hi) / 2):
            return "drifts", "the slope's interval excludes 0"
        return "undetermined", f"the slope's interval excludes 0, but a bound could undo it: {', '.join(bounds)}"
    reasons = []
    if where == "unclear":
        reasons.append(f"the slope's interval is not inside ±{TOLERANCE:g}")
    if method == "fit":
        noise = f", σ = {fit_noise:.3g} nats assumed" if fit_noise is not None else ""
        seeds = "one seed" if n_seeds == 1 else f"{n_seeds} seeds"
        reasons.append(f"{seeds} at some width (transfers needs ≥ {MIN_SEEDS}): the interval is fit-based{noise}")
    if bounds:
        reasons.append(f"optimum on the LR grid's edge at {', '.join(bounds)}")
    if not reasons:
        return "transfers", f"the slope's interval lies inside ±{TOLERANCE:g} with ≥ {MIN_SEEDS} seeds"
    return "undetermined", "; ".join(reasons)
