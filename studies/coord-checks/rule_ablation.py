"""Which GDN-µP rule makes a coordinate grow with width? One rule changed at a time (docs/theory.md, items 3 and 4).

Runs the CPU coordinate check for GDN-µP and for copies of its table with one rule changed, and prints the slopes of
the probes concerned. A variant is a copy of the table, never an edit. Default: the 20-step check under SGD (widths
128…1024, lr 0.03), Gated DeltaNet. With --long: the 100-step checks of studies/coord-checks/long (widths 128–512,
cosine with 10 warm-up steps to 0.1 × the LR, probes every 10 steps; SGD at the SGD study's optimum 2^-5 without
clipping, AdamW at 2^-9 with clipping 1.0 and weight decay 0.1). --model deltaproduct: DeltaProduct₂; --widths,
--seed, --depth: other widths (e.g. 128,256,512,1024), another seed, another depth; --matrix-probes: the per-matrix
probes (dWx., dW., in., align., srank.); --out DIR: each variant's coordinate-check folder (coords.parquet, slopes.csv,
check.json) in DIR/<variant>-s<seed>, for slope_table.py.

    python3 studies/coord-checks/rule_ablation.py [variant ...] > cpu-fp32-128-1024/sgd-rule-ablation.txt
    python3 studies/coord-checks/rule_ablation.py --long gdn-mup "hidden LR x1/sqrt(m)" > long/sgd-rule-ablation.txt
    python3 studies/coord-checks/rule_ablation.py --long --optimizer adamw --model deltaproduct gdn-mup \
        "gate matrices AdamW LR x m^-3/2" > long/gdp2-rule-ablation.txt
"""
from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import polars as pl

from deltamup.models import GATE_MATRICES, ModelConfig, Role
from deltamup.parametrizations import tables
from deltamup.parametrizations.scale import m
from deltamup.parametrizations.table import RoleRule
from deltamup.scaling import coord_check

BASE = tables.GDN_MUP


def _changed(roles: tuple[Role, ...], **change) -> dict[Role, RoleRule]:
    """GDN-µP's rules of `roles` with the same fields changed."""
    return {role: dataclasses.replace(BASE.rules[role], **change) for role in roles}


BOTH, BETA = GATE_MATRICES, (Role.BETA_MATRIX,)  # the paper's one gate-matrix class; W_β alone
VARIANTS = {
    "gdn-mup": {},
    "conv+gain LR x1": {Role.CONV: RoleRule(init=None, lr={"adamw": 1, "sgd": 1}),
                        Role.NORM_GAIN: RoleRule(init=None, lr={"adamw": 1, "sgd": 1}, wd=0.0)},
    "gate scalars LR x1": {Role.GATE_SCALAR: RoleRule(init=None, lr={"adamw": 1, "sgd": 1}, wd=0.0)},
    "gate matrices LR x1": _changed(BOTH, lr={"adamw": 1 / m, "sgd": 1}),
    "gate matrices LR x1/m": _changed(BOTH, lr={"adamw": 1 / m, "sgd": 1 / m}),
    "embedding LR x1": {Role.EMBEDDING: RoleRule(init=BASE.rules[Role.EMBEDDING].init, lr={"adamw": 1, "sgd": 1})},
    "hidden LR x1/sqrt(m)": {Role.HIDDEN: tables.GDN_MUP_SGDHIDDEN.rules[Role.HIDDEN]},  # gdn-mup-sgdhidden
    "gate matrices AdamW LR x m^-3/2": _changed(BOTH, lr={"adamw": m**-1.5, "sgd": m**-0.5}),
    "gate matrices init x m^-1/2 more": _changed(BOTH, init=BASE.rules[Role.GATE_MATRIX].init * m**-0.5),
    # W_β alone, W_α as GDN-µP's (docs/theory.md item 6: block 0's W_β x grows like d^+0.24 under AdamW, W_α x not)
    "W_beta AdamW LR x m^-3/2": _changed(BETA, lr={"adamw": m**-1.5, "sgd": m**-0.5}),
    "W_beta AdamW LR x m^-5/4": {Role.BETA_MATRIX: tables.GDN_MUP_BETALR.rules[Role.BETA_MATRIX]},  # gdn-mup-betalr
    # the hidden matrices' AdamW LR exponent −0.7 instead of µP's −1: undoes the d^-0.3 by which their accumulated
    # updates' alignment with their inputs falls at depth 8 (studies/coord-checks/long/README.md, "Depth 8: every
    # hidden matrix's update lines up less with its input")
    "hidden AdamW LR x m^0.3": {Role.HIDDEN: RoleRule(init=BASE.rules[Role.HIDDEN].init,
                                                      lr={"adamw": m**-0.7, "sgd": 1})},
    # naive µP's gate rules (gdn-mup-mupgates: +0.036 nats at width 1024 in the 8-layer study), and under AdamW their
    # two parts apart (the gate scalars' AdamW LR is × 1 in both tables): W_α, W_β's init σ instead of σ/√m, and
    # their AdamW LR × 1 instead of × 1/m
    "naive µP's gate rules": {role: tables.GDN_MUP_MUPGATES.rules[role] for role in (*BOTH, Role.GATE_SCALAR)},
    "gate matrices init σ (naive µP)": _changed(BOTH, init=tables.MUP.rules[Role.GATE_MATRIX].init),
    "gate matrices AdamW LR x1 (naive µP)": _changed(BOTH, lr={"adamw": 1, "sgd": m**-0.5}),
}
# variants of the forward multipliers, the rules GDN-µP's: the √d before the output RMSNorm dropped; and dropped with
# that norm's ε × 100 (1e-4), which puts the norm on ε at every width of the check with the convolutions at their
# own init (mean(o²)/ε ≤ 0.5 at t = 0), as gdn-mup-codeconv-nosqrtd does by a small v (studies/coord-checks/long)
MULTIPLIER_VARIANTS = {
    "no readout multiplier": tables.GDN_MUP_NOSQRTD.multipliers,  # gdn-mup-nosqrtd
    "no readout multiplier, output norm eps x100": tables.GDN_MUP_EPSREGIME.multipliers,  # gdn-mup-epsregime
}
PROBES = ["block0.alpha_pre", "block0.beta_pre", "block0.mixer_out", "block0.readout", "block1.readout", "logits"]
SHORT = dict(widths=(128, 256, 512, 1024), steps=20)
_LONG = dict(widths=(128, 256, 512), steps=100, schedule="cosine", warmup_steps=10, min_lr_ratio=0.1, every=10)
LONG = {"sgd": dict(_LONG, lr=2.0**-5), "adamw": dict(_LONG, lr=2.0**-9, grad_clip=1.0, weight_decay=0.1)}
MODELS = {"gdn": ModelConfig(kind="gdn", depth=2), "deltaproduct": ModelConfig(kind="deltaproduct", depth=2,
                                                                                 householder=2)}


def main(names: list[str], long: bool, optimizer: str, model: str, widths: tuple[int, ...] | None = None,
         seed: int = 0, depth: int = 2, matrix_probes: bool = False, out: Path | None = None) -> None:
    settings = dict(LONG[optimizer] if long else SHORT, seed=seed, matrix_probes=matrix_probes)
    if widths:
        settings["widths"] = widths
    shown = [10, 20, 50, 100] if long else [1, 4, 6, 8, 10, 15, 20]
    probes = PROBES + (["block0.v", "block0.state", "block1.mixer_out", "block0.mlp_out", "block1.mlp_out"]
                       if long else [])
    for name in names:
        if name in MULTIPLIER_VARIANTS:
            variant = dataclasses.replace(BASE, name=f"ablation: {name}", multipliers=MULTIPLIER_VARIANTS[name])
        else:
            variant = dataclasses.replace(BASE, name=f"ablation: {name}", rules={**BASE.rules, **VARIANTS[name]})
        tables.REGISTRY[variant.name] = variant
        config = dataclasses.replace(MODELS[model], depth=depth)
        check = coord_check.CoordCheck(config, variant.name, optimizer, device="cpu", **settings)
        coords = coord_check.run(check)
        slopes = coord_check.fit_slopes(coords, variant.name, optimizer)
        if out is not None:
            coord_check.write(check, coords, slopes, out / f"{re.sub(r'[^a-z0-9.]+', '-', name.lower())}-s{seed}")
        table = slopes.filter(pl.col("probe").is_in(probes) & pl.col("step").is_in(shown))
        print(f"== {name}")
        with pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, tbl_rows=-1):
            pivot = table.pivot(on="step", index="probe", values="slope")
            print(pivot.with_columns(pl.all().exclude("probe").round(2)))
        if long:
            loss = coords.filter((pl.col("probe") == "loss") & (pl.col("step") == settings["steps"])).sort("width")
            print(f"probe-batch loss at t = {settings['steps']} by width:", ", ".join(f"{v:.3f}" for v in loss["rms"]),
                  flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", metavar="VARIANT",
                        help=f"default: all of {', '.join([*VARIANTS, *MULTIPLIER_VARIANTS])}")
    parser.add_argument("--long", action="store_true", help="the 100-step check at the study's LR and schedule")
    parser.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    parser.add_argument("--model", choices=tuple(MODELS), default="gdn")
    parser.add_argument("--widths", type=lambda s: tuple(int(w) for w in s.split(",")), default=None,
                        help="comma-separated widths instead of the check's (e.g. 128,256,512,1024)")
    parser.add_argument("--seed", type=int, default=0, help="the models' init and the batches")
    parser.add_argument("--depth", type=int, default=2, help="blocks (default 2)")
    parser.add_argument("--matrix-probes", action="store_true",
                        help="also the per-matrix probes (dWx., dW., in., align., srank.)")
    parser.add_argument("--out", type=Path, default=None, help="write each variant's check to OUT/<variant>-s<seed>")
    args = parser.parse_args()
    known = [*VARIANTS, *MULTIPLIER_VARIANTS]
    names = args.variants or known
    if unknown := [n for n in names if n not in known]:
        parser.error(f"unknown variants {unknown}; choose from {known}")
    if args.depth < 1:
        parser.error(f"--depth must be at least 1, got {args.depth}")
    main(names, args.long, args.optimizer, args.model, args.widths, args.seed, args.depth, args.matrix_probes, args.out)
