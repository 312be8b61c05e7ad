"""parametrize: µP for any delta-rule model in one call, its roles inferred from how its shapes grow with width.

    p = parametrize(model, "gdn-mup", optimizer="adamw", base_model=make_model(256), delta_model=make_model(512))
    opt = p.build_optimizer(lr=3e-3, weight_decay=0.1)     # per-role LRs and weight decays
    p.describe()                                           # one row per parameter: role, init std, LR ×, WD ×

It finds every parameter's role (parametrizations.infer; a role map, e.g. roles=FLA, names the roles it knows),
re-draws the initialisation the table prescribes (init=False keeps the weights, e.g. after from_pretrained) — where
the table says "the module's own init" for the short convs it means PyTorch's Conv1d default U(±K^-½), which is
re-drawn too (fla's _init_weights draws them from N(0, 0.02²)); norm gains and gate scalars keep the module's —, and
installs the forward multipliers as buffers + hooks (parametrizations.multipliers) where the role map or the model's
structure places them. The width is the embedding's growing dimension: m = width / base width, d = width, as for
deltamup's own models. On a Hugging Face model the same record is written to `model.config.deltamup`, so
save_pretrained keeps it and `restore_multipliers(model)` puts the hooks back after from_pretrained.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import torch
from torch import nn

from deltamup.models import DeltaLM, Multipliers
from deltamup.models.layers import init_short_conv
from deltamup.models.roles import Role

from .infer import Growth, Structure, classify, growth, structure
from .multipliers import FIELDS, Site, install, uninstall
from .registry import ResolvedRule, build_optimizer, check_optimizer, get, multipliers, param_groups, resolve
from .rolemap import RoleMap, check_fused_readout, get_map
from .table import Parametrization

RECORD = "deltamup.parametrized/1"


@dataclass
class Parametrized:
    """A model with a parametrization applied at its width: what build_optimizer needs, and what was done."""

    model: nn.Module
    parametrization: str
    optimizer: str
    width: int
    base_width: int
    roles: dict[str, Role]            # parameter name -> role
    shapes: dict[str, Growth]         # parameter name -> shape, base shape, growing dimensions
    multipliers: Multipliers          # forward multipliers at this width
    sites: list[Site]                 # where they are installed
    structure: Structure
    role_map: RoleMap | None = None

    @property
    def width_mult(self) -> float:
        return self.width / self.base_width

    def roles_by_id(self) -> dict[int, Role]:
        """{id(param): Role}: the `roles=` argument of parametrizations.build_optimizer and param_groups."""
        params = dict(self.model.named_parameters())
        return {id(params[n]): r for n, r in self.roles.items()}

    def rule(self, name: str) -> ResolvedRule:
        """The table's rule for one parameter at this width."""
        return resolve(self.parametrization, self.roles[name], self.optimizer, self.width_mult, self.width)

    def param_groups(self, lr: float, weight_decay: float = 0.0, eps: float = 1e-8) -> list[dict]:
        """registry.param_groups for this model (eps: AdamW's base ε, times each role's ε multiplier)."""
        return param_groups(self.model.parameters(), self.parametrization, self.optimizer, lr, weight_decay,
                            self.width_mult, self.width, self.roles_by_id(), eps)

    def build_optimizer(self, lr: float, weight_decay: float = 0.0, **kwargs) -> torch.optim.Optimizer:
        """parametrizations.build_optimizer for this model (kwargs: betas, eps, momentum, nesterov)."""
        return build_optimizer(self.model, self.parametrization, self.optimizer, lr, weight_decay=weight_decay,
                               width_mult=self.width_mult, width=self.width, roles=self.roles_by_id(), **kwargs)

    def describe(self) -> list[dict]:
        """One row per trainable parameter: shape (* marks a growing dimension), role, init std, LR and WD
        multipliers at this width."""
        rows = []
        for name, role in self.roles.items():
            r = self.rule(name)
            rows.append({"parameter": name, "shape": self.shapes[name].describe(), "role": str(role),
                         "init std": "module default" if r.init_std is None else f"{r.init_std:.4g}",
                         "LR ×": f"{r.lr_mult:.4g}", "WD ×": f"{r.wd_mult:.4g}"})
        return rows

    def record(self) -> dict:
        """The parametrization as plain data (written to a Hugging Face config as `deltamup`)."""
        return {"schema": RECORD, "parametrization": self.parametrization, "optimizer": self.optimizer,
                "width": self.width, "base_width": self.base_width, "multipliers": asdict(self.multipliers),
                "sites": [s.to_list() for s in self.sites]}


def _known_roles(model: nn.Module, roles: RoleMap | str | Mapping[str, Role] | None) -> tuple[dict, RoleMap | None]:
    if roles is None:
        return {}, None
    if isinstance(roles, (RoleMap, str)):
        role_map = get_map(roles)
        found = {n: role_map.role(n) for n, p in model.named_parameters() if p.requires_grad}
        return {n: r for n, r in found.items() if r is not None}, role_map
    names = {n for n, _ in model.named_parameters()}
    unknown = sorted(set(roles) - names)
    if unknown:
        raise ValueError(f"roles= names parameters the model does not have: {', '.join(unknown[:6])}")
    return {n: Role(r) for n, r in roles.items()}, None


def multiplier_sites(struct: Structure, fields: list[str]) -> tuple[list[Site], list[str]]:
    """Sites for the given Multipliers fields from the model's structure, and a reason for each field with none."""
    sites, missing = [], []
    for field in fields:
        if field == "embedding":
            found = [Site(struct.embedding, field, "output")] if struct.embedding else []
        elif field == "logits":
            found = [Site(struct.logits, field, "output")] if struct.logits else []
        elif field == "mixer_output":
            found = [Site(m.name, field, "output") for m in struct.mixers]
        else:  # readout: the input of each mixer's output norm; readout_eps: that norm's own eps
            bad = [m.name for m in struct.mixers if m.norm in (None, "?")]
            if bad:
                missing.append(f"{field}: mixer {bad[0]} has no single norm child to scale the "
                               f"{'input' if field == 'readout' else 'eps'} of")
                continue
            found = [Site(m.norm, field, "input" if field == "readout" else "eps") for m in struct.mixers]
        if not found:
            missing.append({"embedding": "embedding: the token embedding is not a module (an nn.Embedding)",
                            "logits": "logits: no module computes the logits (a readout module, or one whose "
                                      "weight is the tied embedding)",
                            "mixer_output": "mixer_output: no token mixer found (gate matrices / scalars)",
                            "readout": "readout: no token mixer found (gate matrices / scalars)",
                            "readout_eps": "readout_eps: no token mixer found (gate matrices / scalars)"}[field])
        sites += found
    return sites, missing


def check_beta_told_apart(p: Parametrization, roles: Mapping[str, Role]) -> None:
    """ValueError where `p` gives W_β a rule of its own but the model's W_β sits among its gate matrices (shapes alone
    cannot tell W_β from W_α, and Qwen3-Next holds both in one matrix): it would silently train at W_α's rule."""
    found = set(roles.values())
    if (p.rules[Role.BETA_MATRIX] != p.rules[Role.GATE_MATRIX] and Role.GATE_MATRIX in found
            and Role.BETA_MATRIX not in found):
        raise ValueError(f"{p.name} gives W_β a rule of its own, but this model's W_β is not told apart from its "
                         "gate matrices: name it with roles={name: Role.BETA_MATRIX} (a matrix that holds W_β "
                         "and W_α together cannot take two rules)")


def parametrize(model: nn.Module, parametrization: str, optimizer: str = "adamw", base_model: nn.Module | None = None,
                delta_model: nn.Module | None = None, roles: RoleMap | str | Mapping[str, Role] | None = None,
                init: bool = True, generator: torch.Generator | None = None) -> Parametrized:
    """Apply a parametrization to `model` at its width; see the module docstring.

    base_model: the same architecture at the base width (where every width multiplier is 1); delta_model: the same
    at a third width, needed only when `model` has the base model's shapes. roles: a RoleMap, its name ("fla",
    "qwen3-next") or {parameter name: Role} for the parameters shapes alone cannot classify (these win; the rest is
    inferred). ValueError, in one line, for unclassifiable parameters (all of them), a base model of another
    architecture, or multipliers with nowhere to go."""
    p = get(parametrization)
    check_optimizer(optimizer)
    if isinstance(model, DeltaLM):
        raise ValueError("a DeltaLM takes its parametrization when it is built: "
                         "parametrizations.build_model(config, parametrization, optimizer)")
    if base_model is None:
        raise ValueError("parametrize needs base_model= (the same architecture at the base width)")
    shapes = growth(model, base_model, delta_model)
    known, role_map = _known_roles(model, roles)
    found, problems = classify(model, shapes, known)
    if problems:
        listed = "; ".join(f"{n} {shapes[n].describe()}: {why}" for n, why in list(problems.items())[:6])
        more = f" … ({len(problems)} in all)" if len(problems) > 6 else ""
        raise ValueError(f"cannot classify {len(problems)} parameter{'s' * (len(problems) > 1)} (* = grows with "
                         f"width): {listed}{more}; give them roles with roles={{name: Role}} or a RoleMap")
    check_beta_told_apart(p, found)
    embedding = [n for n, r in found.items() if r is Role.EMBEDDING]
    if not embedding:
        raise ValueError("no token embedding found (an nn.Embedding or a [vocab, width] parameter): the width is "
                         "its growing dimension")
    emb = shapes[max(embedding, key=lambda n: shapes[n].shape[0])]
    if not emb.grows[-1]:
        raise ValueError(f"the token embedding {emb.describe()} does not grow with width")
    width, base_width = emb.shape[-1], emb.base[-1]
    values = multipliers(p, optimizer, width / base_width, width)
    check_fused_readout(model, values.logits)
    struct = structure(model, found)
    fields = [f for f in FIELDS if f in p.multipliers]
    if role_map is not None and role_map.multipliers is not None:
        sites = [s for s in role_map.multipliers.sites(model) if s.field in fields]
        missing = [f"{f}: role map {role_map.name!r} names no module" for f in fields
                   if not any(s.field == f for s in sites)]
    else:
        sites, missing = multiplier_sites(struct, fields)
    if missing:
        raise ValueError(f"{p.name}'s forward multipliers have nowhere to go: " + "; ".join(missing))
    params = dict(model.named_parameters())
    if init:
        with torch.no_grad():
            for name, role in found.items():
                std = resolve(p, role, optimizer, width / base_width, width).init_std
                if std is not None:
                    params[name].normal_(0.0, std, generator=generator)
                elif role is Role.CONV:  # the tables' width-independent conv init, which fla's _init_weights replaces
                    init_short_conv(params[name], generator)
    uninstall(model)
    install(model, sites, values)
    result = Parametrized(model, p.name, optimizer, width, base_width, {n: found[n] for n in shapes}, shapes,
                          values, sites, struct, role_map)
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "to_dict"):  # a Hugging Face config: save_pretrained writes it
        config.deltamup = result.record()
    return result


def restore_multipliers(model: nn.Module) -> list[Site]:
    """Re-install the forward multipliers a Hugging Face model's config records (`config.deltamup`, written by
    parametrize), e.g. after from_pretrained, which drops the hooks; returns the sites."""
    record = getattr(getattr(model, "config", None), "deltamup", None)
    if not isinstance(record, Mapping) or record.get("schema") != RECORD:
        raise ValueError("the model's config has no deltamup record (config.deltamup, written by parametrize)")
    uninstall(model)
    return install(model, [Site(*s) for s in record["sites"]], record["multipliers"])
