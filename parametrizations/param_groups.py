"""A param-groups file: what a training loop needs to train one model µP-style without deltamup at run time.

    write_param_groups(p, "out/param_groups.json", lr=3e-3, weight_decay=0.1)   # p = parametrize(model, …)

writes out/param_groups.json (schema deltamup.param_groups/1) and out/deltamup_param_groups.py (a copy of
parametrizations/standalone.py: PyTorch and json only) that applies it. The file is faithful: per-parameter LR,
weight decay and init std by name, the optimizer and its settings, and every forward multiplier with its module and
side, so `initialize` + `install_multipliers` + `build_optimizer` give the model deltamup would train.

    schema: deltamup.param_groups/1
    parametrization, optimizer, width, base_width, lr, weight_decay: as in the deltamup.export/1 document
    optimizer_kwargs: {betas, eps} (adamw) or {momentum, nesterov} (sgd)
    groups: [{role, lr, weight_decay, init_std (null: the module's own init), params: [parameter names]}, and eps
             where a role's AdamW ε differs from optimizer_kwargs.eps (gdn-mup-adameps)]
    multipliers: [{module, field, side ("input" | "output" | "eps": a norm's own eps), factor}]
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from . import standalone
from .apply import Parametrized

LOADER = "deltamup_param_groups.py"


def param_groups_doc(p: Parametrized, lr: float, weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.95),
                     eps: float = 1e-8, momentum: float = 0.9, nesterov: bool = True) -> dict:
    """The deltamup.param_groups/1 document for a parametrized model (arguments as build_optimizer's)."""
    names = {id(q): n for n, q in p.model.named_parameters()}
    groups = []
    for g in p.param_groups(lr, weight_decay, eps):
        first = names[id(g["params"][0])]
        groups.append({"role": g["role"], "lr": g["lr"], "weight_decay": g["weight_decay"],
                       "init_std": p.rule(first).init_std, "params": [names[id(q)] for q in g["params"]]}
                      | ({"eps": g["eps"]} if g.get("eps", eps) != eps else {}))
    kwargs = {"betas": list(betas), "eps": eps} if p.optimizer == "adamw" else {"momentum": momentum,
                                                                               "nesterov": nesterov}
    return {"schema": standalone.SCHEMA, "parametrization": p.parametrization, "optimizer": p.optimizer,
            "width": p.width, "base_width": p.base_width, "lr": lr, "weight_decay": weight_decay,
            "optimizer_kwargs": kwargs, "groups": groups,
            "multipliers": [{"module": s.module, "field": s.field, "side": s.side,
                             "factor": getattr(p.multipliers, s.field)} for s in p.sites]}


def write_param_groups(p: Parametrized, path: str | Path, lr: float, weight_decay: float = 0.0, **optimizer
                       ) -> list[Path]:
    """param_groups.json at `path` and the loader deltamup_param_groups.py beside it; returns both paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(param_groups_doc(p, lr, weight_decay, **optimizer), indent=1) + "\n")
    loader = path.parent / LOADER
    shutil.copyfile(standalone.__file__, loader)
    return [path, loader]
