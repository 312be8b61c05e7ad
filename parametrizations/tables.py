"""Every parametrization deltamup knows, as data. Any rule of any parametrization is in this file.

m = width / base_width, d = width. init: std of N(0, std²) (None: the module's own width-independent init);
lr: multiplier on the base learning rate; wd: multiplier on the base weight decay (0: never decayed);
eps: multiplier on AdamW's base ε.
Multipliers (models.Multipliers): logits, readout (o before the output RMSNorm), mixer_output, embedding,
readout_eps (on the eps of the output RMSNorm).
expect: the width exponent of every probe's RMS that the theory predicts (see docs/theory.md for the derivations).
"""
from __future__ import annotations

from dataclasses import replace

from deltamup.models.roles import GATE_MATRICES, Role

from .scale import NO_DECAY, Scale, d, m
from .table import FLAT, GROWS, Parametrization, RoleRule, Slope, per_optimizer

SIGMA = 0.02  # the base init std of every normally initialised matrix (GPT-2 / the paper's SP)

# Probe predictions shared by the µP-type tables (docs/theory.md derives each; bands are where a measurement at
# widths 128…1024 may fall given the finite-width correction the theory names).
UNIT_VECTOR = Slope(-0.5, -0.5, below=0.4)          # L2-normalised q, k: size dk^-1/2 by construction; the change
                                                    # is dk^-1/2 × a Θ(1) angle with O(d^-1/2) corrections
STATE = Slope(-0.5, -0.5, above=0.25)               # S ~ Σ β k vᵀ over T_eff tokens: dk^-1/2 while T_eff ≪ dk
THETA_1 = Slope(0.0, 0.0, below=0.4)                # Θ(1), with O(d^-1/2) random-init cross terms at finite width
LOGITS = Slope(-0.5, 0.0, below=0.6)                # init E₀h/m ~ d^-1/2; change ΔE·h/m Θ(1) + E₀·Δh/m ~ d^-1/2
UPDATE_1_OVER_D = Slope(None, -1.0, below=0.15, above=0.15)  # ΔW of a width×width matrix: coordinates 1/d
UPDATE_FLAT = Slope(None, 0.0, below=0.15, above=0.15)       # ΔE of the embedding: Θ(1) coordinates
GATE_BLOWUP = Slope(0.5, None, grows=True)          # W_α x, W_β x with a width-independent init std, fan-in d

# ---------------------------------------------------------------------------------------------------------------
SP = Parametrization(
    name="sp",
    summary="Standard parametrization: std 0.02 everywhere, no multipliers, one learning rate.",
    rules={
        Role.EMBEDDING: RoleRule(init=SIGMA, lr=1),
        Role.READOUT: RoleRule(init=SIGMA, lr=1),
        Role.HIDDEN: RoleRule(init=SIGMA, lr=1),
        Role.GATE_MATRIX: RoleRule(init=SIGMA, lr=1),
        Role.BETA_MATRIX: RoleRule(init=SIGMA, lr=1),
        Role.GATE_SCALAR: RoleRule(init=None, lr=1, wd=NO_DECAY),
        Role.CONV: RoleRule(init=None, lr=1),
        Role.NORM_GAIN: RoleRule(init=None, lr=1, wd=NO_DECAY),
    },
    expect={opt: {
        "q": Slope(-0.5, None), "k": Slope(-0.5, None),  # size by construction; SP promises nothing of the turn
        "v": Slope(0.5, None, grows=True),
        "alpha_pre": GATE_BLOWUP, "beta_pre": GATE_BLOWUP,
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
        Role.BETA_MATRIX: RoleRule(init=SIGMA, lr={"adamw": 1, "sgd": m}, wd={"adamw": 1, "sgd": 1 / m}),
        Role.GATE_SCALAR: RoleRule(init=None, lr=1, wd=NO_DECAY),
        Role.CONV: RoleRule(init=None, lr={"adamw": 1, "sgd": m}, wd={"adamw": 1, "sgd": 1 / m}),
        Role.NORM_GAIN: RoleRule(init=None, lr={"adamw": 1, "sgd": m}, wd=NO_DECAY),
    },
    multipliers={"logits": 1 / m},
    expect={opt: {
        "embed": FLAT, "q": UNIT_VECTOR, "k": UNIT_VECTOR, "v": THETA_1, "state": STATE,
        "readout": Slope(None, -0.5, below=0.4),     # Θ(d^-1/2): no √d before the norm — the defect GDN-µP fixes
        "alpha_pre": GATE_BLOWUP, "beta_pre": GATE_BLOWUP,
        "mlp_out": THETA_1, "logits": LOGITS,
        "update.hidden": UPDATE_1_OVER_D, "update.embedding": UPDATE_FLAT,
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
        Role.BETA_MATRIX: RoleRule(init=SIGMA * m**-0.5, lr={"adamw": 1 / m, "sgd": m**-0.5}),
        Role.GATE_SCALAR: RoleRule(init=None, lr={"adamw": 1, "sgd": m**0.5}, wd=NO_DECAY),
        Role.CONV: RoleRule(init=None, lr={"adamw": 1, "sgd": m}),
        Role.NORM_GAIN: RoleRule(init=None, lr={"adamw": 1, "sgd": m}, wd=NO_DECAY),
    },
    multipliers={"logits": 1 / m, "readout": d**0.5},
    expect={opt: {
        "embed": FLAT, "q": UNIT_VECTOR, "k": UNIT_VECTOR, "v": THETA_1, "state": STATE,
        "readout": Slope(None, 0.0, below=0.4),      # Θ(1) thanks to the √d multiplier
        "alpha_pre": THETA_1, "beta_pre": THETA_1,   # gate matrices initialised and trained like hidden ones
        "mixer_out": THETA_1, "mlp_out": THETA_1, "logits": LOGITS,
        "update.hidden": UPDATE_1_OVER_D, "update.gate_matrix": UPDATE_1_OVER_D, "update.beta_matrix": UPDATE_1_OVER_D,
        "update.embedding": UPDATE_FLAT,
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
        Role.BETA_MATRIX: RoleRule(init=_C, lr={"adamw": 1 / m, "sgd": m**-0.5}),
        Role.GATE_SCALAR: RoleRule(init=None, lr={"adamw": 1, "sgd": m**0.5}, wd=NO_DECAY),
        Role.CONV: RoleRule(init=_C, lr={"adamw": 1 / m, "sgd": 1}),
        Role.NORM_GAIN: RoleRule(init=None, lr={"adamw": 1 / m, "sgd": 1}, wd=NO_DECAY),
    },
    multipliers={"logits": 1 / m, "mixer_output": 1 / m},
    expect={opt: {
        "embed": FLAT, "q": UNIT_VECTOR, "k": UNIT_VECTOR, "logits": LOGITS,
        "mixer_out": Slope(-1.0, None),              # × 1/m on a Θ(1) output
        "update.hidden": UPDATE_1_OVER_D,
    } for opt in ("adamw", "sgd")},
)

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP's √d before the output RMSNorm, written as what it is: RMSNorm(c·o; eps) = RMSNorm(o; eps/c²), so the
# multiplier √d is the norm's eps divided by d — the same model, trained identically (docs/theory.md,
# tests/test_mechanisms.py). The readout probe then measures o itself, Θ(d^-1/2) like naive µP's.
_NO_READOUT = {k: v for k, v in GDN_MUP.multipliers.items() if k != "readout"}
_O_SHRINKS = {opt: {**probes, "readout": Slope(None, -0.5, below=0.4)} for opt, probes in GDN_MUP.expect.items()}
GDN_MUP_NORMEPS = replace(
    GDN_MUP, name="gdn-mup-normeps",
    summary="GDN-µP with the √d before the output RMSNorm written as that norm's eps / d (the same model).",
    multipliers={**_NO_READOUT, "readout_eps": 1 / d}, expect=_O_SHRINKS)
# Neither: no √d and the norm's own eps — GDN-µP's other rules alone. Differs from GDN-µP only where o's mean
# square is not large against the eps (docs/theory.md).
GDN_MUP_NOSQRTD = replace(
    GDN_MUP, name="gdn-mup-nosqrtd",
    summary="GDN-µP without the √d before the output RMSNorm (and the norm's eps unscaled): the other rules alone.",
    multipliers=_NO_READOUT, expect=_O_SHRINKS)

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP with AdamW's ε scaled like each role's gradient (Everett et al. 2024, "Scaling Exponents Across
# Parameterizations and Optimizers": a fixed ε meets gradients that shrink with width). The exponents are the
# gradients' measured ones at initialisation (docs/theory.md): d^-1 for the matrices, embedding, convs and gains,
# d^-1/2 for the gate matrices and scalars.
_EPS = {Role.GATE_MATRIX: m**-0.5, Role.BETA_MATRIX: m**-0.5, Role.GATE_SCALAR: m**-0.5}
GDN_MUP_ADAMEPS = replace(
    GDN_MUP, name="gdn-mup-adameps",
    summary="GDN-µP with AdamW's ε scaled like each role's gradient (1/m; 1/√m for the gates).",
    rules={role: replace(rule, eps={"adamw": _EPS.get(role, 1 / m), "sgd": 1})
           for role, rule in GDN_MUP.rules.items()})

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP with naive µP's gate rules: W_α, W_β initialised with a width-independent std and trained like vectors
# (AdamW LR × 1; SGD × m), A_log and dt_bias at the base LR — GDN-µP's √d and every other rule kept. What the gate
# rules alone buy: the gate pre-activations then grow like √d at init (GATE_BLOWUP), as under naive µP.
_MUP_GATES = {role: replace(GDN_MUP.rules[role], init=MUP.rules[role].init, lr=MUP.rules[role].lr)
              for role in (*GATE_MATRICES, Role.GATE_SCALAR)}
_GATE_UPDATES = {f"update.{role}" for role in GATE_MATRICES}
GDN_MUP_MUPGATES = replace(
    GDN_MUP, name="gdn-mup-mupgates",
    summary="GDN-µP with naive µP's gate rules (W_α, W_β: init σ, LR like vectors; A_log, dt_bias: base LR).",
    rules={**GDN_MUP.rules, **_MUP_GATES},
    expect={opt: {**{k: v for k, v in probes.items() if k not in _GATE_UPDATES},
                  "alpha_pre": GATE_BLOWUP, "beta_pre": GATE_BLOWUP,
                  **({probe: UPDATE_FLAT for probe in _GATE_UPDATES} if opt == "adamw" else {})}
            for opt, probes in GDN_MUP.expect.items()})

# ---------------------------------------------------------------------------------------------------------------
# Naive µP's two gate-matrix rules one at a time; under AdamW the gate scalars' LR is × 1 in both tables, so together
# these two are gdn-mup-mupgates there. `gdn-mup-gateinit`: W_α, W_β initialised with the width-independent σ (so
# W x is √d larger at init), trained as GDN-µP's. `gdn-mup-gatelr`: their AdamW LR × 1 instead of × 1/m (so their
# updates move W x like d), initialised as GDN-µP's; SGD as GDN-µP's.
GDN_MUP_GATEINIT = replace(
    GDN_MUP, name="gdn-mup-gateinit",
    summary="GDN-µP with W_α, W_β initialised with naive µP's width-independent σ (GDN-µP: σ/√m).",
    rules={**GDN_MUP.rules, **{role: replace(GDN_MUP.rules[role], init=MUP.rules[role].init)
                               for role in GATE_MATRICES}},
    expect={opt: {**probes, "alpha_pre": Slope(0.5, 0.0, below=0.4, above=0.1),
                  "beta_pre": Slope(0.5, 0.0, below=0.4, above=0.1)}
            for opt, probes in GDN_MUP.expect.items()})
_GATE_LR = {"adamw": 1, "sgd": GDN_MUP.rules[Role.GATE_MATRIX].lr["sgd"]}
_GATE_LR_GROWS = Slope(0.0, None, grows=True, below=0.4)  # GDN-µP's at init, growing once trained
GDN_MUP_GATELR = replace(
    GDN_MUP, name="gdn-mup-gatelr",
    summary="GDN-µP with W_α, W_β at naive µP's AdamW learning rate (× 1; GDN-µP: × 1/m); SGD as GDN-µP.",
    rules={**GDN_MUP.rules, **{role: replace(GDN_MUP.rules[role], lr=_GATE_LR) for role in GATE_MATRICES}},
    expect={**GDN_MUP.expect,
            "adamw": {**{k: v for k, v in GDN_MUP.expect["adamw"].items() if k not in _GATE_UPDATES},
                      "alpha_pre": _GATE_LR_GROWS, "beta_pre": _GATE_LR_GROWS,
                      **{probe: UPDATE_FLAT for probe in _GATE_UPDATES}}})

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP with naive µP's weight decay on the hidden matrices: MuAdamW multiplies their decay by m, so the decay a
# step (LR × wd: µP's LR × 1/m times wd × m) stays what it is at the base width; GDN-µP's shrinks like 1/m. The third
# and last rule by which naive µP differs from GDN-µP under AdamW, beside the √d (gdn-mup-nosqrtd) and the gate
# rules (gdn-mup-mupgates): tests/test_mechanisms.py builds naive µP from the three. SGD as GDN-µP (naive µP's too).
GDN_MUP_MUPWD = replace(
    GDN_MUP, name="gdn-mup-mupwd",
    summary="GDN-µP with naive µP's AdamW weight decay on the hidden matrices (× m: LR × wd a step kept).",
    rules={**GDN_MUP.rules, Role.HIDDEN: replace(GDN_MUP.rules[Role.HIDDEN], wd={"adamw": m, "sgd": 1})})

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP with W_α, W_β's SGD learning rate × 1/m instead of the paper's × 1/√m — the candidate the 100-step SGD
# coordinate check points to (both gate pre-activations flat at 128–512, stable training; docs/theory.md item 3).
# AdamW is GDN-µP's. The gate update's width slope then differs from GDN-µP's under SGD and is not judged.
GDN_MUP_SGDGATES = replace(
    GDN_MUP, name="gdn-mup-sgdgates",
    summary="GDN-µP with W_α, W_β's SGD learning rate × 1/m (the paper's: × 1/√m); AdamW as GDN-µP.",
    rules={**GDN_MUP.rules, **{role: replace(GDN_MUP.rules[role], lr={"adamw": 1 / m, "sgd": 1 / m})
                               for role in GATE_MATRICES}},
    expect={**GDN_MUP.expect,
            "sgd": {k: v for k, v in GDN_MUP.expect["sgd"].items() if k not in _GATE_UPDATES}})

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP with the hidden matrices' SGD learning rate × 1/√m instead of µP's × 1: the rule that holds the first
# blocks' mixer outputs in the unclipped 100-step SGD check at 2^-5, widths 128–1024, three seeds, where GDN-µP's
# grow 2–120× past width 512 (docs/theory.md item 3; at 2^-6 GDN-µP's stay in band to 2048, so an unclipped
# transfer sweep decides between the two). AdamW is GDN-µP's. The hidden update's width slope then differs from
# GDN-µP's under SGD and is not judged.
GDN_MUP_SGDHIDDEN = replace(
    GDN_MUP, name="gdn-mup-sgdhidden",
    summary="GDN-µP with the hidden matrices' SGD learning rate × 1/√m (µP's: × 1); AdamW as GDN-µP.",
    rules={**GDN_MUP.rules, Role.HIDDEN: replace(GDN_MUP.rules[Role.HIDDEN], lr={"adamw": 1 / m, "sgd": m**-0.5})},
    expect={**GDN_MUP.expect,
            "sgd": {k: v for k, v in GDN_MUP.expect["sgd"].items() if k != "update.hidden"}})

# ---------------------------------------------------------------------------------------------------------------
# GDN-µP with W_β's AdamW learning rate × m^-5/4 instead of the paper's × 1/m (W_α keeps × 1/m): the rule that holds
# block 0's W_β x in its band in the 100-step AdamW check at depth 2, widths 128–1024, three seeds, where GDN-µP's
# grows like d^+0.24; at depth 8 on the CPU, where it hardly grows, it makes it shrink (docs/theory.md item 6; the
# 8-layer sweep's part `betalr` tests it at the study's budget). SGD is GDN-µP's. W_β's update slope then differs
# under AdamW and is not judged. A model whose W_β shapes alone found (a gate matrix) is refused: name it
# Role.BETA_MATRIX.
GDN_MUP_BETALR = replace(
    GDN_MUP, name="gdn-mup-betalr",
    summary="GDN-µP with W_β's AdamW learning rate × m^-5/4 (the paper's: × 1/m, as W_α's); SGD as GDN-µP.",
    rules={**GDN_MUP.rules,
           Role.BETA_MATRIX: replace(GDN_MUP.rules[Role.BETA_MATRIX], lr={"adamw": m**-1.25, "sgd": m**-0.5})},
    expect={**GDN_MUP.expect,
            "adamw": {k: v for k, v in GDN_MUP.expect["adamw"].items() if k != "update.beta_matrix"}})

# ---------------------------------------------------------------------------------------------------------------
# The code variant's two ways of quieting the mixer, one at a time. Its short convolutions initialised like hidden
# matrices (0.5/√d, where their fan-in is the taps) make v shrink like d^-1/2, so the output norm divides by √ε
# rather than by o's RMS from width 256 on (studies/coord-checks/long): `gdn-mup-code-convinit` gives the convs
# their own width-independent init, every other rule the code's. `gdn-mup-mixer1m` is GDN-µP with the code's
# mixer output × 1/m alone.
GDN_MUP_CODE_CONVINIT = replace(
    GDN_MUP_CODE, name="gdn-mup-code-convinit",
    summary="The code variant with the short convolutions at their own width-independent init.",
    rules={**GDN_MUP_CODE.rules, Role.CONV: replace(GDN_MUP_CODE.rules[Role.CONV], init=None)})
GDN_MUP_MIXER1M = replace(
    GDN_MUP, name="gdn-mup-mixer1m",
    summary="GDN-µP with the token mixer's output × 1/m (the public code's multiplier), every other rule GDN-µP's.",
    multipliers={**GDN_MUP.multipliers, "mixer_output": 1 / m},
    expect={opt: {**probes, "mixer_out": Slope(-1.0, None)} for opt, probes in GDN_MUP.expect.items()})

# ---------------------------------------------------------------------------------------------------------------
# The code variant's convolution init on GDN-µP's rules. At the 8-layer study's budget the code variant's lead at
# width 1024 goes with its short convolutions' init (0.5/√d over the 4 taps; `gdn-mup-code-convinit` loses it):
# `gdn-mup-codeconv` puts that init alone on GDN-µP, whose √d keeps the output norm normalising (a small v alone);
# `gdn-mup-codeconv-nosqrtd` drops the √d as well, so the norm divides by √ε as in the code variant (a small v and
# the ε regime). The conv init shrinks v like d^-1/2 at t = 0, and the state S ~ Σ β k vᵀ with it. The trained
# bands are GDN-µP's, on the premise that the convs' Θ(1) AdamW updates soon outgrow that init; the 100-step check at
# 2^-9 finds they do not (v's change still d^-0.3…-0.5 and the state's d^-0.8…-1.0 at t = 100,
# studies/coord-checks/long). The bands are as set before it ran. Without the √d the mixer output at t = 0 falls
# with o/√ε and is not predicted.
_V_SMALL = {"v": Slope(-0.5, 0.0, below=0.4), "state": Slope(-1.0, -0.5, above=0.25)}
GDN_MUP_CODECONV = replace(
    GDN_MUP, name="gdn-mup-codeconv",
    summary="GDN-µP with the short convolutions at the code variant's init (c/√d, the hidden class's).",
    rules={**GDN_MUP.rules, Role.CONV: replace(GDN_MUP.rules[Role.CONV], init=_C)},
    expect={opt: {**probes, **_V_SMALL} for opt, probes in GDN_MUP.expect.items()})
GDN_MUP_CODECONV_NOSQRTD = replace(
    GDN_MUP_CODECONV, name="gdn-mup-codeconv-nosqrtd",
    summary="GDN-µP with the code variant's convolution init and no √d before the output RMSNorm (its ε regime).",
    multipliers=_NO_READOUT,
    expect={opt: {**{k: v for k, v in probes.items() if k != "mixer_out"}, **_V_SMALL}
            for opt, probes in _O_SHRINKS.items()})

# Why the code's convolution init wins, two ways apart. The convs' own init is U(±1/2) over their 4 taps (σ 1/(2√3));
# the code's is 0.5/√d, √(d/3) times smaller. AdamW steps a weight by about its LR whatever the weight's size, so
# that init (1) turns the convs' filters √(d/3) times further a step relative to their size, and (2) keeps their
# outputs small, where the SiLU after them is nearly linear (SiLU(z) ≈ z/2) and the norms that follow (q, k's L2
# norm, the output RMSNorm) take the scale out. `gdn-mup-convstep` is (1) alone: the convs at their own init with
# the code init's relative step, AdamW LR × √(d/3) and weight decay × √(3/d) (so the decay a step, LR × wd, stays).
# `gdn-mup-codeconv-ownstep` is (2) alone: the code's init with GDN-µP's relative step, LR × √(3/d) and weight decay
# × √(d/3). Under AdamW a conv initialised at σ/c and trained at LR/c moves as 1/c times one at σ trained at LR, and
# only the SiLU (and the norms' ε) sees the scale: ownstep differs from GDN-µP, and convstep from codeconv, in the
# SiLU's range alone (the study's part `conv-why`; tests/test_mechanisms.py checks the relative steps).
_CONV_STEP = (d / 3) ** 0.5
_CONV = GDN_MUP.rules[Role.CONV]  # both tables scale its AdamW entries and keep its SGD ones (codeconv's: init only)


def _conv_step(times: Scale) -> RoleRule:
    """GDN-µP's convolution rule with AdamW's LR × `times` and its weight decay ÷ `times` (LR × wd kept)."""
    return replace(_CONV, lr={"adamw": per_optimizer(_CONV.lr, "adamw") * times, "sgd": per_optimizer(_CONV.lr, "sgd")},
                   wd={"adamw": per_optimizer(_CONV.wd, "adamw") / times, "sgd": per_optimizer(_CONV.wd, "sgd")})


GDN_MUP_CONVSTEP = replace(
    GDN_MUP, name="gdn-mup-convstep",
    summary="GDN-µP with the convs' AdamW LR × √(d/3), weight decay × √(3/d): the code init's relative step at "
            "their own init.",
    rules={**GDN_MUP.rules, Role.CONV: _conv_step(_CONV_STEP)},
    expect={opt: {**probes, "v": replace(THETA_1, trained=None), "state": replace(STATE, trained=None)}
            for opt, probes in GDN_MUP.expect.items()})
GDN_MUP_CODECONV_OWNSTEP = replace(
    GDN_MUP_CODECONV, name="gdn-mup-codeconv-ownstep",
    summary="gdn-mup-codeconv with the convs' AdamW LR × √(3/d), weight decay × √(d/3): the code's init at their own "
            "init's relative step.",
    rules={**GDN_MUP_CODECONV.rules,
           Role.CONV: replace(_conv_step(1 / _CONV_STEP), init=GDN_MUP_CODECONV.rules[Role.CONV].init)},
    expect={opt: {**probes, **{k: replace(v, trained=None) for k, v in _V_SMALL.items()}}
            for opt, probes in GDN_MUP_CODECONV.expect.items()})

# The same ε regime with v at full size: no √d and the output norm's ε × 100 (1e-4), the convolutions at their own
# init. mean(o²)/ε at t = 0 is then ≤ 0.5 from width 128 on, and in the 100-step CPU check it lowers the loss as
# much as gdn-mup-codeconv-nosqrtd (studies/coord-checks/long): whether that is the ε regime itself.
GDN_MUP_EPSREGIME = replace(
    GDN_MUP_NOSQRTD, name="gdn-mup-epsregime",
    summary="GDN-µP with the output norm on its ε: no √d before it and its ε × 100 (1e-4 at the default).",
    multipliers={**_NO_READOUT, "readout_eps": 100.0},
    expect={opt: {k: v for k, v in probes.items() if k != "mixer_out"} for opt, probes in _O_SHRINKS.items()})

REGISTRY: dict[str, Parametrization] = {p.name: p for p in (SP, MUP, GDN_MUP, GDN_MUP_CODE, GDN_MUP_NORMEPS,
                                                            GDN_MUP_NOSQRTD, GDN_MUP_ADAMEPS, GDN_MUP_MUPGATES,
                                                            GDN_MUP_GATEINIT, GDN_MUP_GATELR, GDN_MUP_MUPWD,
                                                            GDN_MUP_SGDGATES, GDN_MUP_SGDHIDDEN, GDN_MUP_BETALR,
                                                            GDN_MUP_CODE_CONVINIT, GDN_MUP_MIXER1M,
                                                            GDN_MUP_CODECONV, GDN_MUP_CODECONV_NOSQRTD,
                                                            GDN_MUP_EPSREGIME, GDN_MUP_CONVSTEP,
                                                            GDN_MUP_CODECONV_OWNSTEP)}
