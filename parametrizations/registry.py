"""The parametrization registry: look a parametrization up by name and apply it to a model or an optimizer.

The rules themselves live in parametrizations/tables.py; this module only reads them.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from difflib import get_close_matches

import torch
from torch import nn

from deltamup.models import DeltaLM, ModelConfig, Multipliers, Role, role_of

from .hparams import BaseHparams
from .table import OPTIMIZERS, Parametrization, RoleRule, Slope, per_optimizer
from .tables import REGISTRY


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str | Parametrization) -> Parametrization:
    if isinstance(name, Parametrization):
        return name
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(unknown_message(str(name))) from None


def unknown_message(name: str) -> str:
    """One line for a name the registry lacks: the closest names, the four parametrizations that are not mechanism
    variants, and where the full list is (too long for one line)."""
    close = get_close_matches(name.lower(), REGISTRY, n=3, cutoff=0.6)
    main = [n for n in REGISTRY if n in ("sp", "mup", "gdn-mup", "gdn-mup-code")]
    return (f"unknown parametrization {name!r}; " + (f"did you mean {' or '.join(close)}? " if close else "")
            + f"{', '.join(main)} or one of {len(REGISTRY) - len(main)} mechanism variants of gdn-mup "
            f"(`deltamup describe --list` lists every one)")


def check_optimizer(optimizer: str) -> str:
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    return optimizer


@dataclass(frozen=True)
class ResolvedRule:
    """A role's rule at one width: init std (None: module default), LR, weight-decay and Adam-ε multipliers."""

    role: Role
    init_std: float | None
    lr_mult: float
    wd_mult: float
    rule: RoleRule
    eps_mult: float = 1.0


def resolve(parametrization: str | Parametrization, role: Role, optimizer: str, width_mult: float,
            width: float) -> ResolvedRule:
    p = get(parametrization)
    rule = p.rules[role]
    init = per_optimizer(rule.init, optimizer)
    return ResolvedRule(role, None if init is None else init(width_mult, width),
                        per_optimizer(rule.lr, optimizer)(width_mult, width),
                        per_optimizer(rule.wd, optimizer)(width_mult, width), rule,
                        per_optimizer(rule.eps, optimizer)(width_mult, width))


def multipliers(parametrization: str | Parametrization, optimizer: str, width_mult: float,
                width: float, hparams: BaseHparams = BaseHparams()) -> Multipliers:
    """The table's forward multipliers at this width; hparams' output_mult and embed_mult scale the logits and
    embedding multipliers."""
    p = get(parametrization)
    values = {k: per_optimizer(v, optimizer)(width_mult, width) for k, v in p.multipliers.items()}
    values["logits"] = values.get("logits", 1.0) * hparams.output_mult
    values["embedding"] = values.get("embedding", 1.0) * hparams.embed_mult
    return Multipliers(**values)


def build_model(config: ModelConfig, parametrization: str | Parametrization = "sp", optimizer: str = "adamw",
                seed: int | None = None, hparams: BaseHparams = BaseHparams()) -> DeltaLM:
    """A DeltaLM with the parametrization's forward multipliers and initialisation at config.width.

    seed: draws the initialisation from torch.manual_seed(seed) (None: the global RNG as it is).
    hparams: the base model's other hyperparameters (parametrizations.hparams), applied through the table."""
    p = get(parametrization)
    check_optimizer(optimizer)
    if seed is not None:
        torch.manual_seed(seed)
    model = DeltaLM(config, multipliers(p, optimizer, config.width_mult, config.width, hparams))
    return initialize(model, p, optimizer, init_mult=hparams.init_mult)


def _model_scale(model: nn.Module, width_mult: float | None, width: float | None) -> tuple[float, float]:
    config = getattr(model, "config", None)
    if width_mult is None:
        if config is None:
            raise ValueError("pass width_mult= (and width=) for a model without a deltamup config")
        width_mult = config.width_mult
    if width is None:
        width = config.width if config is not None else width_mult
    return width_mult, width


@torch.no_grad()
def initialize(model: nn.Module, parametrization: str | Parametrization, optimizer: str = "adamw",
               width_mult: float | None = None, width: float | None = None, generator: torch.Generator | None = None,
               init_mult: float = 1.0) -> nn.Module:
    """Re-draw every parameter whose role has an init std (times init_mult); others keep the module's own
    initialisation."""
    m_, d_ = _model_scale(model, width_mult, width)
    for param in model.parameters():
        std = resolve(parametrization, role_of(param), optimizer, m_, d_).init_std
        if std is not None:
            param.normal_(0.0, std * init_mult, generator=generator)
    return model


def param_groups(params: Iterable[nn.Parameter], parametrization: str | Parametrization, optimizer: str,
                 lr: float, weight_decay: float, width_mult: float, width: float,
                 roles: dict[int, Role] | None = None, eps: float = 1e-8) -> list[dict]:
    """One param group per role: {"params", "role", "lr", "base_lr", "lr_mult", "weight_decay"}, and for AdamW
    "eps" (the base ε times the role's ε multiplier).

    `roles` (id(param) -> Role) overrides `param.role`, for models whose parameters are mapped by name."""
    check_optimizer(optimizer)
    by_role: dict[Role, list[nn.Parameter]] = {}
    for param in params:
        if not param.requires_grad:
            continue
        role = roles[id(param)] if roles is not None else role_of(param)
        by_role.setdefault(role, []).append(param)
    groups = []
    for role, ps in by_role.items():
        r = resolve(parametrization, role, optimizer, width_mult, width)
        group = {"params": ps, "role": str(role), "lr": lr * r.lr_mult, "base_lr": lr * r.lr_mult,
                 "lr_mult": r.lr_mult, "weight_decay": weight_decay * r.wd_mult}
        groups.append(group | ({"eps": eps * r.eps_mult} if optimizer == "adamw" else {}))
    return groups


def build_optimizer(model: nn.Module, parametrization: str | Parametrization, optimizer: str, lr: float,
                    weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8,
                    momentum: float = 0.9, nesterov: bool = True, width_mult: float | None = None,
                    width: float | None = None, roles: dict[int, Role] | None = None) -> torch.optim.Optimizer:
    """AdamW or SGD (with momentum) whose param groups carry the parametrization's per-role learning rates."""
    if not lr > 0:
        raise ValueError(f"learning rate must be positive, got {lr}")
    m_, d_ = _model_scale(model, width_mult, width)
    groups = param_groups(model.parameters(), parametrization, optimizer, lr, weight_decay, m_, d_, roles, eps)
    if optimizer == "adamw":
        fused = all(p.is_cuda for p in model.parameters())  # one kernel for every parameter's update
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused)
    return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=nesterov and momentum > 0,
                           weight_decay=weight_decay)


def describe_rows(parametrization: str | Parametrization, optimizer: str, width: int, base_width: int) -> list[dict]:
    """One row per parameter role: its rules, and their values at `width` and at `base_width`."""
    p = get(parametrization)
    check_optimizer(optimizer)
    m_ = width / base_width
    rows = []
    for role in Role:
        at, base = (resolve(p, role, optimizer, mm, w) for mm, w in ((m_, width), (1.0, base_width)))
        rule = p.rules[role]
        init = per_optimizer(rule.init, optimizer)
        rows.append({
            "class": str(role),
            "init std": "module default" if init is None else str(init),
            f"@{width}": "-" if at.init_std is None else f"{at.init_std:.4g}",
            f"@{base_width}": "-" if base.init_std is None else f"{base.init_std:.4g}",
            "LR ×": str(per_optimizer(rule.lr, optimizer)),
            f"LR @{width}": f"{at.lr_mult:.4g}",
            f"LR @{base_width}": f"{base.lr_mult:.4g}",
            "weight decay ×": "no decay" if at.wd_mult == 0 else str(per_optimizer(rule.wd, optimizer)),
            **({"Adam ε ×": str(per_optimizer(rule.eps, optimizer))} if optimizer == "adamw" else {}),
        })
    return rows


def describe_multipliers(parametrization: str | Parametrization, optimizer: str, width: int,
                         base_width: int) -> list[dict]:
    """One row per forward multiplier: the rule and its value at `width` and at `base_width`."""
    p = get(parametrization)
    rows = []
    for name in (f.name for f in fields(Multipliers)):
        rule = per_optimizer(p.multipliers.get(name, 1.0), optimizer)
        rows.append({"forward multiplier": name, "rule": str(rule),
                     f"@{width}": f"{rule(width / base_width, width):.4g}",
                     f"@{base_width}": f"{rule(1.0, base_width):.4g}"})
    return rows


def expected_slope(parametrization: str | Parametrization, optimizer: str, probe: str) -> Slope | None:
    """The theory's Slope for a probe name such as 'block3.readout' or 'update.hidden' (None: no prediction)."""
    key = probe.split(".", 1)[1] if probe.startswith("block") else probe
    return get(parametrization).expect.get(optimizer, {}).get(key)
