"""Role maps: give any model's parameters this project's roles by name, so the registry's rules apply to it.

A RoleMap is an ordered list of (regex, Role); a parameter takes the role of the first pattern that `re.search`es
its name (as `model.named_parameters()` spells it). Every trainable parameter must match, or `roles()` raises and
lists the ones that did not: nothing is silently trained at the wrong rate.

    roles = FLA.roles(model)                              # {id(param): Role}
    opt = parametrizations.build_optimizer(model, "gdn-mup", "adamw", lr=3e-3, width_mult=4.0, width=1024,
                                           roles=roles)
    parametrizations.initialize(FLA.tag(model), "gdn-mup", "adamw", width_mult=4.0, width=1024)
    attach_multipliers(model, parametrizations.multipliers("gdn-mup", "adamw", 4.0, 1024), FLA_MULTIPLIERS)

A user's own model gets its map the same way: RoleMap("mine", ((r"\\.wte\\.weight$", Role.EMBEDDING), ...)).
Forward multipliers (models.Multipliers) cannot live in param groups; a MultiplierMap names the modules whose input
or output each one scales, and `attach_multipliers` installs them as forward hooks.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

from torch import nn

from deltamup.models.config import Multipliers
from deltamup.models.roles import Role, tagged


@dataclass(frozen=True)
class RoleMap:
    """name: what the map is for; patterns: (regex on the parameter name, Role), first match wins."""

    name: str
    patterns: Sequence[tuple[str, Role]]

    def role(self, parameter_name: str) -> Role | None:
        for pattern, role in self.patterns:
            if re.search(pattern, parameter_name):
                return role
        return None

    def named_roles(self, model: nn.Module) -> dict[str, Role]:
        """{parameter name: Role} for every trainable parameter; ValueError listing the names no pattern matches."""
        named, unmatched = {}, []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            role = self.role(name)
            if role is None:
                unmatched.append(name)
            named[name] = role
        if unmatched:
            shown = ", ".join(unmatched[:8]) + (f" … ({len(unmatched)} in all)" if len(unmatched) > 8 else "")
            raise ValueError(f"role map {self.name!r} has no pattern for the parameters {shown}")
        return named

    def roles(self, model: nn.Module) -> dict[int, Role]:
        """{id(param): Role}: the `roles=` argument of parametrizations.build_optimizer / param_groups."""
        named = self.named_roles(model)
        return {id(p): named[n] for n, p in model.named_parameters() if n in named}

    def tag(self, model: nn.Module) -> nn.Module:
        """Attach the mapped role to every trainable parameter as `param.role` (what deltamup's own layers do), so
        parametrizations.initialize and build_optimizer work on the model without `roles=`."""
        named = self.named_roles(model)
        for name, param in model.named_parameters():
            if name in named:
                tagged(param, named[name])
        return model


# flash-linear-attention 0.6's GatedDeltaNet and GatedDeltaProduct models (…ForCausalLM and …Model), including the
# hybrid attention layers' projections and the MLPs. Names such as model.layers.3.attn.a_proj.weight.
FLA = RoleMap("fla", (
    (r"(^|\.)embeddings\.weight$", Role.EMBEDDING),
    (r"(^|\.)lm_head\.weight$", Role.READOUT),
    (r"\.(A_log|dt_bias)$", Role.GATE_SCALAR),
    (r"\.(a_proj|b_proj)\.weight$", Role.GATE_MATRIX),
    (r"_conv1d\.weight$", Role.CONV),
    (r"norm\.weight$", Role.NORM_GAIN),  # attn_norm, mlp_norm, o_norm, the final norm
    (r"\.(q|k|v|g|o)_proj\.weight$", Role.HIDDEN),
    (r"\.mlp\.(gate|up|down)_proj\.weight$", Role.HIDDEN),
))


@dataclass(frozen=True)
class MultiplierMap:
    """(regex on the module name, Multipliers field, "input" | "output" | "eps"): which tensor each forward
    multiplier scales ("eps": the module's own `eps` attribute, for readout_eps on a norm)."""

    name: str
    patterns: Sequence[tuple[str, str, str]]


FLA_MULTIPLIERS = MultiplierMap("fla", (
    (r"(^|\.)embeddings$", "embedding", "output"),
    (r"\.attn\.o_norm$", "readout", "input"),      # o = scale·Sᵀq, before the gated output RMSNorm
    (r"\.attn\.o_proj$", "mixer_output", "output"),
    (r"\.attn\.o_norm$", "readout_eps", "eps"),    # the gated output RMSNorm's eps
    (r"(^|\.)lm_head$", "logits", "output"),
))


def _scale_input(factor: float):
    return lambda _module, args: (args[0] * factor, *args[1:])


def _scale_output(factor: float):
    return lambda _module, _args, output: output * factor


def attach_multipliers(model: nn.Module, multipliers: Multipliers, where: MultiplierMap) -> list:
    """Install every multiplier ≠ 1 as a forward (pre-)hook on the modules `where` names (an eps multiplier scales
    the module's eps once, in place); returns the hook handles.

    ValueError when a multiplier ≠ 1 finds no module (it would silently be dropped), or for the logits multiplier
    on an fla model that fuses the readout into the loss (config.fuse_linear_cross_entropy bypasses lm_head)."""
    config = getattr(model, "config", None)
    if multipliers.logits != 1 and getattr(config, "fuse_linear_cross_entropy", False):
        raise ValueError("the logits multiplier needs fuse_linear_cross_entropy=False (the fused loss skips lm_head)")
    handles = []
    for f in fields(Multipliers):
        factor = getattr(multipliers, f.name)
        if factor == 1:
            continue
        hooked = 0
        for pattern, field_name, side in where.patterns:
            if field_name != f.name:
                continue
            for module_name, module in model.named_modules():
                if not re.search(pattern, module_name):
                    continue
                if side == "eps":
                    if not isinstance(getattr(module, "eps", None), float):
                        raise ValueError(f"{module_name} has no float eps for the {f.name} multiplier")
                    module.eps *= factor  # changes the module itself: no hook handle
                elif side == "input":
                    handles.append(module.register_forward_pre_hook(_scale_input(factor)))
                else:
                    handles.append(module.register_forward_hook(_scale_output(factor)))
                hooked += 1
        if not hooked:
            raise ValueError(f"multiplier map {where.name!r} finds no module for the {f.name} multiplier {factor:g}")
    return handles
