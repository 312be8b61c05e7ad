"""Scale: a rule's value as a power law of width, c · m^p · d^q (m = width / base_width, d = width).

Tables are written with the symbols `m`, `d` and plain numbers: `0.02 * m**-0.5`, `1 / m`, `d**0.5`.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Scale:
    coef: float = 1.0
    m_pow: float = 0.0
    d_pow: float = 0.0

    def __call__(self, m: float, d: float) -> float:
        return self.coef * m ** self.m_pow * d ** self.d_pow

    def __mul__(self, other: Scale | float) -> Scale:
        other = as_scale(other)
        return Scale(self.coef * other.coef, self.m_pow + other.m_pow, self.d_pow + other.d_pow)

    __rmul__ = __mul__

    def __pow__(self, p: float) -> Scale:
        return Scale(self.coef ** p, self.m_pow * p, self.d_pow * p)

    def __truediv__(self, other: Scale | float) -> Scale:
        return self * as_scale(other) ** -1

    def __rtruediv__(self, other: float) -> Scale:
        return as_scale(other) / self

    def __str__(self) -> str:
        if self.coef == 0:
            return "0"
        parts = [] if self.coef == 1 and (self.m_pow or self.d_pow) else [f"{self.coef:g}"]
        for sym, p in (("m", self.m_pow), ("d", self.d_pow)):
            if p == 1:
                parts.append(sym)
            elif p == 0.5:
                parts.append(f"√{sym}")
            elif p:
                parts.append(f"{sym}^{Fraction(p).limit_denominator(8)}")
        return "·".join(parts)


def as_scale(x: Scale | float) -> Scale:
    return x if isinstance(x, Scale) else Scale(float(x))


m = Scale(m_pow=1.0)
d = Scale(d_pow=1.0)
NO_DECAY = Scale(0.0)
