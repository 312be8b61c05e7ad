"""The transfer verdict of a (parametrization, optimizer): read from the 90% interval of the slope of log2(optimal LR)
against log2(width), in octaves of optimum per octave of width (0: the LR transfers; SP under AdamW: about −1).

- transfers     the interval lies inside ±TOLERANCE, every width's interval is a seed bootstrap (at least
                MIN_SEEDS seeds at its optimum), and no optimum is a bound (grid edge);
- drifts        the interval excludes 0 and does not lie inside ±TOLERANCE, and every width's interval is a seed
                bootstrap (an interval that rests on a bound is open on the side the bound could push it, so a
                bound cannot undo a drift it leaves standing);
- undetermined  everything else, and fewer than two widths with an optimum.

A fit-based interval (fewer seeds) assumes its noise level instead of measuring it, and a seed's noise is not the
white noise it assumes (one seed's curve is off the mean by a smooth, LR-correlated amount): on a committed CPU
sweep one seed alone gives a fit interval that excludes 0 by 0.6 octave per octave where three seeds do not. So it
yields no confident verdict either way; `suggestion` says what it points to ("a drift", "transfer"), and the verdict
stays undetermined. The same rule reads the shift of a width's optimum between two horizons (`classify`): settled
(inside ±TOLERANCE octave), moving (excludes 0, not inside), unclear.
"""
from __future__ import annotations

import numpy as np

from .intervals import MIN_SEEDS

TOLERANCE = 0.25  # octaves of optimum per octave of width (a horizon shift: octaves)
VERDICTS = ("transfers", "drifts", "undetermined")


def classify(lo: float | None, hi: float | None, tolerance: float = TOLERANCE) -> str:
    """'inside' (the interval lies inside ±tolerance), 'excludes_zero' (it does not, and excludes 0) or 'unclear'.
    An end may be ±inf (open: reports/intervals.py's open_bounds)."""
    if lo is None or hi is None or np.isnan(lo) or np.isnan(hi):
        return "unclear"
    if -tolerance <= lo and hi <= tolerance:
        return "inside"
    return "excludes_zero" if lo > 0 or hi < 0 else "unclear"


def suggestion(lo: float | None, hi: float | None) -> str | None:
    """What an interval points to when it cannot decide (a fit-based one): 'a drift', 'transfer' or None."""
    return {"inside": "transfer", "excludes_zero": "a drift"}.get(classify(lo, hi))


def verdict(slope_lo: float | None, slope_hi: float | None, n_seeds: int, method: str, log2_widths: np.ndarray,
            edges: list[str | None], fit_noise: float | None = None) -> tuple[str, str]:
    """(verdict, the reason in a few words) from the slope's interval; see the module docstring."""
    if len(log2_widths) < 2 or slope_lo is None:
        return "undetermined", "fewer than two widths with an optimum"
    where = classify(slope_lo, slope_hi)
    bounds = [f"{2 ** x:.0f} ({e} edge)" for x, e in zip(log2_widths, edges) if e]
    if method == "fit":
        noise = f", σ = {fit_noise:.3g} nats assumed" if fit_noise is not None else ""
        seeds = "one seed" if n_seeds == 1 else f"{n_seeds} seeds"
        hint = suggestion(slope_lo, slope_hi)
        hint = f"; it suggests {hint}" if hint else ""
        return "undetermined", (f"{seeds} at some width (a verdict needs ≥ {MIN_SEEDS}): the interval is fit-based"
                                f"{noise}{hint}")
    if where == "excludes_zero":
        return "drifts", "the slope's interval excludes 0" + (f" (open beyond the bounds at {', '.join(bounds)})"
                                                               if bounds else "")
    if where == "unclear":
        return "undetermined", (f"the slope's interval is not inside ±{TOLERANCE:g} and includes 0"
                                + (f" (open beyond the bounds at {', '.join(bounds)})" if bounds else ""))
    if bounds:
        return "undetermined", f"optimum on the LR grid's edge at {', '.join(bounds)}"
    return "transfers", f"the slope's interval lies inside ±{TOLERANCE:g} with ≥ {MIN_SEEDS} seeds"
