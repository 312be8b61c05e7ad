"""Documented deviations: the (probe, steps) whose measured slope is known to fall outside the theory's band.

Each one is explained, with a candidate cause and a way to settle it, in docs/theory.md ("Where the measurement
disagrees", item `item`). The coordinate check reads this table: a slope off its band that a row covers is reported
as "documented", any other as "NEW", and `deltamup coord-check --check` fails only on new ones. A row covers the
probes its `probe` names in a model of the given kind (None: any), for steps first…last (None: every later step);
"{last}" in a probe stands for the last block's index. Rows marked edge measured inside the band by less than 0.01 at
seed 0 and are listed so that another machine's rounding cannot turn them into a spurious failure.

Measured on the CPU in fp32 at widths 128…1024, seed 0, depth 2, 8 × 64 tokens, AdamW lr 1e-2 / SGD lr 0.03
(`deltamup coord-check -p gdn-mup --optimizer adamw --out DIR`, tests/test_coord_check.py).
"""
from __future__ import annotations

from dataclasses import dataclass

DOC = "docs/theory.md#where-the-measurement-disagrees"


@dataclass(frozen=True)
class Deviation:
    parametrization: str
    optimizer: str
    probe: str                    # e.g. "block{last}.mlp_out", "block0.beta_pre"
    first: int                    # first step covered
    last: int | None              # last step covered (None: every later one)
    item: int                     # the numbered item in docs/theory.md's section
    reason: str                   # one line
    kind: str | None = None       # the model kind measured (None: any)

    def covers(self, kind: str | None, parametrization: str, optimizer: str, probe: str, step: int,
               last_block: int) -> bool:
        return (self.parametrization == parametrization and self.optimizer == optimizer
                and self.kind in (None, kind) and self.probe.replace("{last}", str(last_block)) == probe
                and self.first <= step and (self.last is None or step <= self.last))

    @property
    def link(self) -> str:
        return f"{DOC} (item {self.item})"


DOCUMENTED: tuple[Deviation, ...] = (
    Deviation("gdn-mup", "adamw", "block{last}.readout", 1, 1, 1,
              "last block's readout change at t = 1: q·k cross terms of the random initial keys, gone from t = 2"),
    Deviation("gdn-mup", "sgd", "block{last}.readout", 1, 4, 1,
              "last block's readout change under SGD: the same transient, settled from t ≈ 8 (20-step run)"),
    Deviation("gdn-mup", "adamw", "block{last}.readout", 5, 5, 1, "edge of the band at t = 5"),
    Deviation("gdn-mup", "adamw", "block{last}.mlp_out", 2, None, 2,
              "last block's MLP output change shrinks under AdamW (−0.3…−1.1 on the CPU); open"),
    Deviation("gdn-mup", "sgd", "block0.alpha_pre", 2, 2, 3, "block 0's W_α x grows under SGD (+0.13…+0.22); open"),
    Deviation("gdn-mup", "sgd", "block0.mixer_out", 5, None, 3,
              "block 0's mixer output change grows under SGD from t ≈ 5: an LR near the edge of stability; open"),
    Deviation("gdn-mup", "sgd", "block0.beta_pre", 1, 1, 3, "edge of the band (block 0's gates under SGD)"),
    Deviation("gdn-mup", "sgd", "update.gate_matrix", 5, None, 3,
              "W_α's own update under SGD from t = 5 (−0.82): the same onset, every role's update steps up at t = 5",
              kind="gdn"),
    Deviation("gdn-mup", "adamw", "block0.mixer_out", 2, 3, 4,
              "DeltaProduct₂'s mixer output grows ~d^0.15: the GDN-µP rules carried over are close, not exact",
              kind="deltaproduct"),
    Deviation("gdn-mup", "adamw", "block{last}.alpha_pre", 2, 2, 4, "the same, DeltaProduct₂'s W_α x",
              kind="deltaproduct"),
    Deviation("gdn-mup", "adamw", "block{last}.state", 5, 5, 5,
              "state at t = 5 just below its band (β and the decay both trained)"),
    Deviation("gdn-mup", "adamw", "block0.beta_pre", 2, None, 6,
              "block 0's W_β x grows under AdamW after t = 2: W_β's LR exponent (× m^-5/4 holds it at depth 2)",
              kind="gdn"),
    Deviation("gdn-mup", "adamw", "block0.mlp_out", 50, None, 7,
              "block 0's MLP output change shrinks late in a long cosine run (−0.38…−0.57 from t = 50); open",
              kind="gdn"),
)


def documented(kind: str | None, parametrization: str, optimizer: str, probe: str, step: int,
               last_block: int) -> Deviation | None:
    """The table's row covering this probe at this step, if any."""
    return next((d for d in DOCUMENTED if d.covers(kind, parametrization, optimizer, probe, step, last_block)), None)
