"""The data types a parametrization table is made of."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from deltamup.models.roles import Role

from .scale import Scale, as_scale

OPTIMIZERS = ("adamw", "sgd")
PerOptimizer = Scale | float | Mapping[str, Scale | float]


def per_optimizer(rule: PerOptimizer | None, optimizer: str) -> Scale | None:
    """A rule that may differ by optimizer, resolved for one."""
    if rule is None:
        return None
    if isinstance(rule, Mapping):
        return as_scale(rule[optimizer])
    return as_scale(rule)


@dataclass(frozen=True)
class RoleRule:
    """How one parameter role scales with width.

    init: std of a normal initialisation, or None for the module's own width-independent init (gains = 1,
          A_log/dt_bias as in Mamba-2, short convs as PyTorch's Conv1d).
    lr:   multiplier on the base learning rate.
    wd:   multiplier on the base weight decay (0: never decayed).
    eps:  multiplier on AdamW's base ε (SGD has none): Adam divides by √v̂ + ε, so an ε that does not shrink with
          the gradients of this role would damp their updates as width grows (docs/theory.md).
    """

    init: PerOptimizer | None
    lr: PerOptimizer
    wd: PerOptimizer = 1.0
    eps: PerOptimizer = 1.0


@dataclass(frozen=True)
class Slope:
    """Expected log-log slope of a probe against width: of its RMS at initialisation (at_init) and of the RMS of
    its change x_t − x_0 after t ≥ 1 updates (trained), and how far below/above it a measurement may fall.

    None: the theory makes no width prediction worth testing there. grows=True: only assert slope > GROWTH
    (SP's blow-up, whose exact exponent depends on the learning rate and step). The bounds are 0.1 for sizes fixed
    by construction; wider, and one-sided, where the theory names a finite-width correction that competes with
    the leading term at widths 128…1024 (docs/theory.md derives and measures each one)."""

    at_init: float | None
    trained: float | None
    grows: bool = False
    below: float = 0.1
    above: float = 0.1

    def expected(self, step: int) -> float | None:
        return self.at_init if step == 0 else self.trained

    def admits(self, step: int, slope: float) -> bool | None:
        """Whether a measured slope agrees with the prediction at `step` (None: nothing predicted there)."""
        if self.grows and step > 0:
            return slope > GROWTH
        value = self.expected(step)
        if value is None:
            return None
        return value - self.below <= slope <= value + self.above

    def describe(self, step: int) -> str | None:
        if self.grows and step > 0:
            return f">{GROWTH:g}"
        value = self.expected(step)
        if value is None:
            return None
        return f"{value:g} [{value - self.below:+.2f}, {value + self.above:+.2f}]"


GROWTH = 0.1  # a "grows" probe must have slope above this


def exact(exponent: float, tolerance: float = 0.1) -> Slope:
    return Slope(exponent, exponent, below=tolerance, above=tolerance)


FLAT = exact(0.0)
GROWS = Slope(None, None, grows=True)


@dataclass(frozen=True)
class Parametrization:
    """One parametrization: rules per role, forward multipliers and the probe sizes the theory predicts.

    expect maps optimizer -> probe -> Slope; probe names drop the block prefix ("q" for block{i}.q) and
    "update.<role>" is the RMS of that role's weight update ΔW.
    """

    name: str
    summary: str
    rules: Mapping[Role, RoleRule]
    multipliers: Mapping[str, PerOptimizer] = field(default_factory=dict)
    expect: Mapping[str, Mapping[str, Slope]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = set(Role) - set(self.rules)
        if missing:
            raise ValueError(f"parametrization {self.name!r} has no rule for {sorted(map(str, missing))}")
