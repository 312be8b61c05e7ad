"""Every parametrization deltamup knows, as data. Any rule of any parametrization is in this file.

m = width / base_width, d = width. init: std of N(0, std²) (None: the module's own width-independent init);
lr: multiplier on the base learning rate; wd: multiplier on the base weight decay (0: never decayed).
Multipliers (models.Multipliers): logits, readout (o before the output RMSNorm), mixer_output, embedding.
expect: the width exponent of every probe's RMS that the theory predicts (see docs/theory.md for the derivations).
"""
from __future__ import annotations

from models.roles import Role

from .scale import NO_DECAY, d, m
from .table import FLAT, GROWS, Parametrization, RoleRule, Slope, exact

E = Role.EMBEDDING, Role.READOUT
SIGMA = 0.02  # the base init std of every normally initialised matrix (GPT-2 / the paper's SP)

# ---------------------------------------------------------------------------------------------------------------
SP = Parametrization(
    name="sp",
    summary="Standard parametrization: std 0.02 everywhere, no multipliers, one learning rate.",
    rules={
        Role.EMBEDDING: RoleRule(init=SIGMA, lr=1),
        Role.READOUT: RoleRule(init=SIGMA, lr=1),
        Role.HIDDEN: RoleRule(init=SIGMA, lr=1),
        Role.GATE_MATRIX: RoleRule(init=SIGMA, lr=1),
        Role.GATE_SCALAR: RoleRule(init=None, lr=1, wd=NO_DECAY),
        Role.CONV: RoleRule(init=None, lr=1),
        Role.NORM_GAIN: RoleRule(init=None, lr=1, wd=NO_DECAY),
    },
    expect={opt: {
        "q": exact(-0.5), "k": exact(-0.5),
        "mixer_out": GROWS, "mlp_out": GROWS, "logits": Slope(0.5, None, grows=True),
    } for opt in ("adamw", "sgd")},
)

# ---------------------------------------------------------------------------------------------------------------
# Naive µP: exactly what microsoft/mup 1.0 does to this model (proved in tests/test_mup_equivalence.py).
# set_base_shapes sees which dimensions grow; MuAdamW divides the LR of tensors with two growing dimensions by m
# (and multiplies their weight decay by m); MuSGD multiplies the LR of tensors with one growing dimension by m
# (weight decay / m) and divides matrices' LR by their fan-in/fan-out multiplier ratio (1 here);
# mup.init keeps vector-like stds and divides matrix-like ones by √m; MuReadout multiplies logits by 1/m.
# Nothing GDN-specific: W_α, W_β ([heads, d]) count as vector-like, A_log and dt_bias as fixed, no √d readout.
MUP = Parametrization(
    name="mup",
    summary="Naive µP (microsoft/mup applied to the model as is): no GDN-specific rules, no √d before the norm.",
    rules={
        Role.EMBEDDING: RoleRule(init=SIGMA, lr={"adamw": 1, "sgd": m}, wd={"adamw": 1, "sgd": 1 / m}),
        Role.READOUT: RoleRule(init=SIGMA, lr={"adamw": 1, "sgd": m}, wd={"adamw": 1, "sgd": 1 / m}),
        Role.HIDDEN: RoleRule(init=SIGMA * m**-0.5, lr={"adamw": 1 / m, "sgd": 1}, wd={"adamw": m, "sgd": 1}),
        Role.GATE_MATRIX: RoleRule(init=SIGMA, lr={"adamw": 1, "sgd": m}, wd={"adamw": 1, "sgd": 1 / m}),
        Role.GATE_SCALAR: RoleRule(init=None, lr=1, wd=NO_DECAY),
        Role.CONV: RoleRule(init=None, lr={"adamw": 1, "sgd": m}, wd={"adamw": 1, "sgd": 1 / m}),
        Role.NORM_GAIN: RoleRule(init=None, lr={"adamw": 1, "sgd": m}, wd=NO_DECAY),
    },
    multipliers={"logits": 1 / m},
    expect={opt: {
        "embed": FLAT, "q": exact(-0.5), "k": exact(-0.5), "v": FLAT, "state": exact(-0.5),
        "readout": Slope(None, -0.5),
        "mixer_out": FLAT, "mlp_out": FLAT, "logits": Slope(-0.5, 0.0),
        "update.hidden": Slope(None, -1.0), "update.embedding": Slope(None, 0.0),
    } for opt in ("adamw", "sgd")},
)

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP as the paper's text defines it (gdn-mup.md): µP for every standard class, √d on o before the output
# RMSNorm, gate matrices W_α/W_β initialised and (under AdamW) trained like hidden matrices, and under SGD the gate
# rules the paper derives: W_α, W_β LR Θ(1/√d), A_log, dt_bias LR Θ(√d).
GDN_MUP = Parametrization(
    name="gdn-mup",
    summary="GDN-µP (paper text): µP + √d before the output RMSNorm + SGD gate rules (W_α,W_β ∝ 1/√m; A_log,dt ∝ √m).",
    rules={
        Role.EMBEDDING: RoleRule(init=SIGMA, lr={"adamw": 1, "sgd": m}),
        Role.READOUT: RoleRule(init=SIGMA, lr={"adamw": 1, "sgd": m}),
        Role.HIDDEN: RoleRule(init=SIGMA * m**-0.5, lr={"adamw": 1 / m, "sgd": 1}),
        Role.GATE_MATRIX: RoleRule(init=SIGMA * m**-0.5, lr={"adamw": 1 / m, "sgd": m**-0.5}),
        Role.GATE_SCALAR: RoleRule(init=None, lr={"adamw": 1, "sgd": m**0.5}, wd=NO_DECAY),
        Role.CONV: RoleRule(init=None, lr={"adamw": 1, "sgd": m}),
        Role.NORM_GAIN: RoleRule(init=None, lr={"adamw": 1, "sgd": m}, wd=NO_DECAY),
    },
    multipliers={"logits": 1 / m, "readout": d**0.5},
    expect={opt: {
        "embed": FLAT, "q": exact(-0.5), "k": exact(-0.5), "v": FLAT, "state": exact(-0.5),
        "readout": Slope(None, 0.0), "alpha_pre": FLAT, "beta_pre": FLAT,
        "mixer_out": FLAT, "mlp_out": FLAT, "logits": Slope(-0.5, 0.0),
        "update.hidden": Slope(None, -1.0), "update.gate_matrix": Slope(None, -1.0),
        "update.embedding": Slope(None, 0.0),
    } for opt in ("adamw", "sgd")},
)

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP as the first author's public code implements it (github.com/lauyikfung/gated_delta_net_mup): hidden init
# c/√d with c = 0.5 (AdamW) or 0.32 (SGD), short convs in the hidden class, gains trained at 1/m under AdamW,
# the token mixer's output × 1/m, and no explicit √d before the output RMSNorm.
_C = {"adamw": 0.5 * d**-0.5, "sgd": 0.32 * d**-0.5}
GDN_MUP_CODE = Parametrization(
    name="gdn-mup-code",
    summary="GDN-µP as the paper's public code does it: c/√d inits, mixer output × 1/m, no √d readout multiplier.",
    rules={
        Role.EMBEDDING: RoleRule(init=SIGMA, lr={"adamw": 1, "sgd": m}),
        Role.READOUT: RoleRule(init=SIGMA, lr={"adamw": 1, "sgd": m}),
        Role.HIDDEN: RoleRule(init=_C, lr={"adamw": 1 / m, "sgd": 1}),
        Role.GATE_MATRIX: RoleRule(init=_C, lr={"adamw": 1 / m, "sgd": m**-0.5}),
        Role.GATE_SCALAR: RoleRule(init=None, lr={"adamw": 1, "sgd": m**0.5}, wd=NO_DECAY),
        Role.CONV: RoleRule(init=_C, lr={"adamw": 1 / m, "sgd": 1}),
        Role.NORM_GAIN: RoleRule(init=None, lr={"adamw": 1 / m, "sgd": 1}, wd=NO_DECAY),
    },
    multipliers={"logits": 1 / m, "mixer_output": 1 / m},
    expect={opt: {
        "embed": FLAT, "q": exact(-0.5), "k": exact(-0.5), "logits": Slope(-0.5, 0.0),
        "mixer_out": Slope(-1.0, None),
    } for opt in ("adamw", "sgd")},
)

REGISTRY: dict[str, Parametrization] = {p.name: p for p in (SP, MUP, GDN_MUP, GDN_MUP_CODE)}
