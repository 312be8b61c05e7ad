"""Role maps: give another library's model this project's roles by parameter name, and say where its forward
multipliers and coordinate-check probes sit, so the registry's rules apply to it.

A RoleMap is an ordered list of (regex, Role); a parameter takes the role of the first pattern that `re.search`es
its name (as `model.named_parameters()` spells it). `deltamup.parametrizations.parametrize` reads a map where one is
given (roles=FLA) and infers the roles of the parameters it does not match from their shapes; on its own, `roles()`
requires every trainable parameter to match and lists the ones that do not.

    p = parametrize(fla_model, "gdn-mup", optimizer="adamw", base_model=fla_base, roles=FLA)

A user's own model gets its map the same way: RoleMap("mine", ((r"\\.wte\\.weight$", Role.EMBEDDING), ...)).
A SiteMap lists (regex on the module name, label, "input" | "output" | "eps"): for `multipliers` the label is a
models.Multipliers field ("eps": the norm's own float `eps` or `variance_epsilon`, for readout_eps), for `probes` a
probe name of the parametrization tables' `expect` ("alpha_pre", "readout", …); a probe in a numbered layer is
reported as block<i>.<probe>.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

from torch import nn

from deltamup.models.config import Multipliers
from deltamup.models.roles import Role, tagged

from .multipliers import Site, install


@dataclass(frozen=True)
class SiteMap:
    """name: what the map is for; patterns: (regex on the module name, label, "input" | "output")."""

    name: str
    patterns: Sequence[tuple[str, str, str]]

    def sites(self, model: nn.Module) -> list[Site]:
        """One Site per (pattern, matching module), in the map's order."""
        return [Site(module_name, label, side) for pattern, label, side in self.patterns
                for module_name, _ in model.named_modules() if module_name and re.search(pattern, module_name)]


@dataclass(frozen=True)
class RoleMap:
    """name: what the map is for; patterns: (regex on the parameter name, Role), first match wins; multipliers and
    probes: where the forward multipliers and the coordinate-check probes sit (None: found from the structure)."""

    name: str
    patterns: Sequence[tuple[str, Role]]
    multipliers: SiteMap | None = None
    probes: SiteMap | None = None

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
FLA_MULTIPLIERS = SiteMap("fla", (
    (r"(^|\.)embeddings$", "embedding", "output"),
    (r"\.attn\.o_norm$", "readout", "input"),      # o = scale·Sᵀq, before the gated output RMSNorm
    (r"\.attn$", "mixer_output", "output"),         # the layer's output: W_o's (the first of its outputs)
    (r"\.attn\.o_norm$", "readout_eps", "eps"),    # the gated output RMSNorm's eps
    (r"(^|\.)lm_head$", "logits", "output"),
))
FLA = RoleMap("fla", (
    (r"(^|\.)embeddings\.weight$", Role.EMBEDDING),
    (r"(^|\.)lm_head\.weight$", Role.READOUT),
    (r"\.(A_log|dt_bias)$", Role.GATE_SCALAR),
    (r"\.a_proj\.weight$", Role.GATE_MATRIX),
    (r"\.b_proj\.weight$", Role.BETA_MATRIX),
    (r"_conv1d\.weight$", Role.CONV),
    (r"norm\.weight$", Role.NORM_GAIN),  # attn_norm, mlp_norm, o_norm, the final norm
    (r"\.(q|k|v|g|o)_proj\.weight$", Role.HIDDEN),
    (r"\.mlp\.(gate|up|down)_proj\.weight$", Role.HIDDEN),
), multipliers=FLA_MULTIPLIERS, probes=SiteMap("fla", (
    (r"(^|\.)embeddings$", "embed", "output"),
    (r"\.attn\.a_proj$", "alpha_pre", "output"),
    (r"\.attn\.b_proj$", "beta_pre", "output"),
    (r"\.attn\.o_norm$", "readout", "input"),
    (r"\.attn$", "mixer_out", "output"),
    (r"\.layers\.\d+\.mlp$", "mlp_out", "output"),
    (r"(^|\.)lm_head$", "logits", "output"),
)))

# transformers' Qwen3-Next (Qwen3NextForCausalLM / Qwen3NextModel): Gated DeltaNet layers `linear_attn` (in_proj_qkvz
# = W_q, W_k, W_v and the output gate's W_g in one matrix; in_proj_ba = W_β and W_α; one depthwise conv over q, k, v;
# the gated RMSNorm `norm`; out_proj), gated softmax-attention layers `self_attn`, dense or mixture-of-experts MLPs.
# The MoE router (mlp.gate, [experts, d]) and the shared expert's gate ([1, d]) project the width onto a fixed number
# of gate logits, as W_α and W_β do onto the heads: they take the gate-matrix rules, as does in_proj_ba (W_β and W_α
# in one matrix, so a table that gives W_β a rule of its own cannot apply to it). Qwen3-Next's RMSNorm weights
# are offsets (gain = 1 + w, initialised to 0): still gains, trained as such.
QWEN3_NEXT_MULTIPLIERS = SiteMap("qwen3-next", (
    (r"(^|\.)embed_tokens$", "embedding", "output"),
    (r"\.linear_attn\.norm$", "readout", "input"),
    (r"\.linear_attn$", "mixer_output", "output"),
    (r"\.linear_attn\.norm$", "readout_eps", "eps"),  # the gated RMSNorm's variance_epsilon
    (r"(^|\.)lm_head$", "logits", "output"),
))
QWEN3_NEXT = RoleMap("qwen3-next", (
    (r"(^|\.)embed_tokens\.weight$", Role.EMBEDDING),
    (r"(^|\.)lm_head\.weight$", Role.READOUT),
    (r"\.linear_attn\.(A_log|dt_bias)$", Role.GATE_SCALAR),
    (r"\.linear_attn\.in_proj_ba\.weight$", Role.GATE_MATRIX),
    (r"\.mlp\.(gate|shared_expert_gate)\.weight$", Role.GATE_MATRIX),
    (r"\.linear_attn\.conv1d\.weight$", Role.CONV),
    (r"norm\.weight$", Role.NORM_GAIN),  # input/post-attention layernorms, q_norm, k_norm, the gated norm, final
    (r"\.linear_attn\.(in_proj_qkvz|out_proj)\.weight$", Role.HIDDEN),
    (r"\.self_attn\.(q|k|v|o)_proj\.weight$", Role.HIDDEN),
    (r"\.(gate|up|down)_proj(\.weight)?$", Role.HIDDEN),  # dense and shared-expert MLPs
    (r"\.experts\.(gate_up_proj|down_proj)$", Role.HIDDEN),  # [experts, …] stacks of width×width matrices
), multipliers=QWEN3_NEXT_MULTIPLIERS, probes=SiteMap("qwen3-next", (
    (r"(^|\.)embed_tokens$", "embed", "output"),
    (r"\.linear_attn\.in_proj_ba$", "ba_pre", "output"),
    (r"\.linear_attn\.norm$", "readout", "input"),
    (r"\.linear_attn$", "mixer_out", "output"),
    (r"\.layers\.\d+\.mlp$", "mlp_out", "output"),
    (r"(^|\.)lm_head$", "logits", "output"),
)))

MAPS = {m.name: m for m in (FLA, QWEN3_NEXT)}


def get_map(name: str | RoleMap) -> RoleMap:
    if isinstance(name, RoleMap):
        return name
    try:
        return MAPS[name]
    except KeyError:
        raise ValueError(f"unknown role map {name!r}; choose one of {', '.join(MAPS)}") from None


def attach_multipliers(model: nn.Module, multipliers: Multipliers, where: SiteMap) -> list[Site]:
    """Install every multiplier ≠ 1 on the modules `where` names (multipliers.install: a buffer and a hook each);
    returns the sites.

    ValueError when a multiplier ≠ 1 finds no module (it would silently be dropped), or for the logits multiplier
    on an fla model that fuses the readout into the loss (config.fuse_linear_cross_entropy bypasses lm_head)."""
    check_fused_readout(model, multipliers.logits)
    sites = [s for s in where.sites(model) if getattr(multipliers, s.field) != 1]
    for f in fields(Multipliers):
        factor = getattr(multipliers, f.name)
        if factor != 1 and not any(s.field == f.name for s in sites):
            raise ValueError(f"multiplier map {where.name!r} finds no module for the {f.name} multiplier {factor:g}")
    return install(model, sites, multipliers)


def check_fused_readout(model: nn.Module, logits: float) -> None:
    if logits != 1 and getattr(getattr(model, "config", None), "fuse_linear_cross_entropy", False):
        raise ValueError("the logits multiplier needs fuse_linear_cross_entropy=False (the fused loss skips lm_head)")
