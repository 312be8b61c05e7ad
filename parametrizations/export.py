"""Tuned hyperparameters for a target width, as a plain YAML/JSON document (no pickle), and back to param groups.

Schema `deltamup.export/1` (every key always present; floats in SI units, LRs per optimizer step):

    schema: deltamup.export/1
    parametrization: gdn-mup          # registry name
    optimizer: adamw                  # adamw | sgd
    width: 4096                       # the target width the values below are for
    base_width: 256                   # the width where every width multiplier is 1 (m = width / base_width)
    width_mult: 16.0
    lr: 0.003                         # the tuned base LR: what build_optimizer(lr=…) takes; every role scales it
    weight_decay: 0.1                 # the base weight decay
    tuned_width: 256                  # the sweep width the LR was tuned at
    model: {kind: gdn, width: 4096, depth: 8, …}          # models.ModelConfig at the target width
    multipliers: {embedding: 1.0, readout: 64.0, mixer_output: 1.0, logits: 0.0625}   # forward multipliers
    tuned_multipliers: {…}                                 # the same at tuned_width
    groups:                           # one entry per parameter role present in the model
      hidden:
        lr: 0.0001875                 # lr × lr_mult: the param group's learning rate
        lr_mult: 0.0625
        weight_decay: 0.1             # weight_decay × wd_mult (0: never decayed)
        wd_mult: 1.0
        init_std: 0.005               # std of N(0, std²); null: the module's own width-independent init
        eps_mult: 1.0                 # AdamW's ε for this role: train.eps (default 1e-8) × eps_mult
        tensors: 88                   # how many parameters of this role the model has …
        elements: 1610612736          # … and their total size: what "a model of this shape" means
        tuned: {lr: 0.003, init_std: 0.02, weight_decay: 0.1}   # the same role at tuned_width
      …
    train: {betas: [0.9, 0.95], warmup_steps: …}           # the sweep's other optimizer settings (may be empty)
    hparams: {output_mult: 2.0, init_mult: 0.5}            # tuned base values other than LR and weight decay
                                                           # (parametrizations.hparams; empty: the table's own), already
                                                           # applied above: in multipliers and every init_std
    provenance: {sweep: /abs/path, spec_sha256: …, best_lr_grid: …, bound: false, metric: …, created_utc: …}

    exp = load_export("train.yaml")
    opt = exp.build_optimizer(model)             # checks the model's shape, then parametrizations.build_optimizer
    opt = exp.build_optimizer(fla_model, roles=rolemap.FLA.roles(fla_model))
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import yaml
from torch import nn

from deltamup.models import DeltaLM, ModelConfig, role_of
from deltamup.models.roles import Role

from .hparams import BaseHparams, check_hparam
from .registry import build_optimizer, check_optimizer, get, multipliers, resolve

SCHEMA = "deltamup.export/1"
FORMATS = ("yaml", "json", "fla")
TRAIN_KEYS = ("betas", "eps", "momentum", "nesterov")  # build_optimizer's keyword arguments an export may carry
REL_TOL = 1e-9


@dataclass(frozen=True)
class RoleExport:
    lr: float
    lr_mult: float
    weight_decay: float
    wd_mult: float
    init_std: float | None
    tensors: int
    elements: int
    tuned: dict
    eps_mult: float = 1.0  # AdamW ε = train.eps (default 1e-8) × eps_mult


@dataclass(frozen=True)
class Export:
    """A deltamup.export/1 document; see the module docstring for every field."""

    parametrization: str
    optimizer: str
    width: int
    base_width: int
    width_mult: float
    lr: float
    weight_decay: float
    tuned_width: int
    model: dict
    multipliers: dict
    tuned_multipliers: dict
    groups: dict[str, RoleExport]
    train: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    hparams: dict = field(default_factory=dict)
    schema: str = SCHEMA

    def to_dict(self) -> dict:
        d = asdict(self)
        return {"schema": d.pop("schema"), **d}

    def model_config(self) -> ModelConfig:
        return ModelConfig(**self.model)

    def check_model(self, model: nn.Module, roles: dict[int, Role] | None = None) -> None:
        """ValueError saying how `model` differs from the model this export is for (config fields where the model is
        a deltamup model, else per-role parameter counts and sizes)."""
        config = getattr(model, "config", None)
        if isinstance(config, ModelConfig):
            theirs = config.to_dict()
            diff = [k for k, v in self.model.items() if k != "kernel_backend" and theirs.get(k) != v]
            if diff:
                raise ValueError("this export is for a model with " + ", ".join(f"{k}={self.model[k]}" for k in diff)
                                 + "; the model has " + ", ".join(f"{k}={theirs.get(k)}" for k in diff))
        have = role_sizes(model, roles)
        want = {role: (g.tensors, g.elements) for role, g in self.groups.items()}
        if have != want:
            lines = [f"{r}: export {want.get(r, (0, 0))[0]} tensors / {want.get(r, (0, 0))[1]:,} elements, model "
                     f"{have.get(r, (0, 0))[0]} / {have.get(r, (0, 0))[1]:,}"
                     for r in sorted(set(have) | set(want)) if have.get(r) != want.get(r)]
            raise ValueError(f"model shape does not match this export (width {self.width}, "
                             f"{self.model.get('kind')} depth {self.model.get('depth')}): " + "; ".join(lines))

    def optimizer_args(self) -> dict:
        """Keyword arguments of parametrizations.build_optimizer that recreate this export's param groups."""
        train = {k: (tuple(v) if k == "betas" else v) for k, v in self.train.items() if k in TRAIN_KEYS}
        return dict(parametrization=self.parametrization, optimizer=self.optimizer, lr=self.lr,
                    weight_decay=self.weight_decay, width_mult=self.width_mult, width=self.width, **train)

    def build_optimizer(self, model: nn.Module, roles: dict[int, Role] | None = None) -> torch.optim.Optimizer:
        """The optimizer with this export's per-role LRs and weight decays for `model` (shape-checked first); a
        ValueError if the registry's rules no longer give the exported values."""
        self.check_model(model, roles)
        opt = build_optimizer(model, roles=roles, **self.optimizer_args())
        for group in opt.param_groups:
            want = self.groups[group["role"]]
            for key in ("lr", "weight_decay"):
                if not math.isclose(group[key], getattr(want, key), rel_tol=REL_TOL, abs_tol=0.0):
                    raise ValueError(f"{self.parametrization}'s rule for {group['role']} gives {key} {group[key]:g} "
                                     f"now, the export says {getattr(want, key):g}: the registry changed since")
        return opt


def role_sizes(model: nn.Module, roles: dict[int, Role] | None = None) -> dict[str, tuple[int, int]]:
    """{role: (tensors, elements)} over the model's trainable parameters."""
    sizes: dict[str, tuple[int, int]] = {}
    for p in model.parameters():
        if p.requires_grad:
            role = str(roles[id(p)] if roles is not None else role_of(p))
            n, e = sizes.get(role, (0, 0))
            sizes[role] = (n + 1, e + p.numel())
    return sizes


def _values(parametrization: str, role: Role, optimizer: str, lr: float, weight_decay: float, width: int,
            base_width: int, init_mult: float = 1.0) -> dict:
    r = resolve(parametrization, role, optimizer, width / base_width, width)
    return dict(lr=lr * r.lr_mult, lr_mult=r.lr_mult, weight_decay=weight_decay * r.wd_mult, wd_mult=r.wd_mult,
                init_std=None if r.init_std is None else r.init_std * init_mult, eps_mult=r.eps_mult)


def make_export(parametrization: str, optimizer: str, model: ModelConfig, lr: float, weight_decay: float = 0.0,
                tuned_width: int | None = None, train: dict | None = None, provenance: dict | None = None,
                hparams: dict | None = None) -> Export:
    """The export for `model` (its width is the target width) of a base LR tuned at `tuned_width` (default: the
    target width). Parameter counts come from a model built on the meta device: no memory, any width.

    hparams: tuned base values of parametrizations.hparams (output_mult, embed_mult, init_mult), applied through
    the table at both widths: in `multipliers`, `tuned_multipliers` and every role's init_std."""
    p = get(parametrization).name
    check_optimizer(optimizer)
    if not lr > 0:
        raise ValueError(f"learning rate must be positive, got {lr}")
    hparams = {k: float(v) for k, v in (hparams or {}).items()}
    for name, value in hparams.items():
        check_hparam(name, value)
    if "weight_decay" in hparams:
        raise ValueError("pass a tuned weight decay as weight_decay=, not among the model's hparams")
    base = BaseHparams.of(hparams)
    tuned_width = tuned_width or model.width
    model.with_width(tuned_width)  # validates the head layout there
    with torch.device("meta"):
        sizes = role_sizes(DeltaLM(model))
    groups = {}
    for role_name, (tensors, elements) in sizes.items():
        role = Role(role_name)
        at_tuned = _values(p, role, optimizer, lr, weight_decay, tuned_width, model.base_width, base.init_mult)
        groups[role_name] = RoleExport(**_values(p, role, optimizer, lr, weight_decay, model.width, model.base_width,
                                                 base.init_mult),
                                       tensors=tensors, elements=elements,
                                       tuned={k: at_tuned[k] for k in ("lr", "init_std", "weight_decay")})

    def mults(width: int) -> dict:
        return asdict(multipliers(p, optimizer, width / model.base_width, width, base))

    return Export(parametrization=p, optimizer=optimizer, width=model.width, base_width=model.base_width,
                  width_mult=model.width_mult, lr=lr, weight_decay=weight_decay, tuned_width=tuned_width,
                  model=model.to_dict(), multipliers=mults(model.width), tuned_multipliers=mults(tuned_width),
                  groups=groups, train={k: list(v) if isinstance(v, tuple) else v for k, v in (train or {}).items()},
                  provenance=dict(provenance or {}), hparams=hparams)


def from_dict(doc: dict) -> Export:
    """An Export from a parsed document (or an fla config.json carrying one under "deltamup"); ValueError naming
    what is wrong otherwise."""
    doc = doc.get("deltamup", doc) if isinstance(doc, dict) else doc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"not a deltamup export (schema {found!r}, expected {SCHEMA!r})")
    names = {f.name for f in dataclasses.fields(Export)}
    missing = sorted(n for n in names - set(doc) if n not in ("train", "provenance", "hparams"))
    if missing:
        raise ValueError(f"deltamup export lacks {', '.join(missing)}")
    try:
        groups = {role: RoleExport(**g) for role, g in doc["groups"].items()}
        unknown = set(groups) - {str(r) for r in Role}
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}")
    except (TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"deltamup export has malformed groups: {e}") from None
    return Export(**{**{k: v for k, v in doc.items() if k in names}, "groups": groups})


def load_export(path: str | Path) -> Export:
    """Read an export written as YAML, JSON or an fla config.json (safe loaders only)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"export file {path} does not exist")
    text = path.read_text()
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"cannot parse {path}: {e}") from None
    return from_dict(doc)


FLA_ARCHITECTURES = {"gdn": ("gated_deltanet", "GatedDeltaNetForCausalLM"),
                     "deltaproduct": ("gated_deltaproduct", "GatedDeltaProductForCausalLM")}


def fla_config(export: Export) -> dict:
    """A config.json for flash-linear-attention's GatedDeltaNet / GatedDeltaProduct ForCausalLM with the same
    parameter shapes as the export's model; the export itself rides along under "deltamup" (µP LRs, inits and
    forward multipliers, which fla's own config has no place for: apply them with parametrizations.rolemap)."""
    c = export.model_config()
    if c.kind not in FLA_ARCHITECTURES:
        raise ValueError(f"the fla format covers kinds {', '.join(FLA_ARCHITECTURES)}, not {c.kind!r}")
    expand_v = c.head_v_dim / c.head_k_dim
    if int(c.head_k_dim * expand_v) != c.head_v_dim:
        raise ValueError(f"value head dim {c.head_v_dim} is not int(key head dim {c.head_k_dim} × expand_v) in fla")
    model_type, architecture = FLA_ARCHITECTURES[c.kind]
    config = dict(model_type=model_type, architectures=[architecture], hidden_size=c.width,
                  num_hidden_layers=c.depth, num_heads=c.heads, head_dim=c.head_k_dim, expand_v=expand_v,
                  intermediate_size=c.mlp_hidden, hidden_act="swish", conv_size=c.conv_size, use_short_conv=True,
                  norm_eps=c.norm_eps, vocab_size=c.vocab_size, tie_word_embeddings=c.tie_embeddings,
                  allow_neg_eigval=c.allow_neg_eigval, initializer_range=export.groups["embedding"].init_std or 0.02,
                  fuse_linear_cross_entropy=False)
    if c.kind == "gdn":
        config.update(use_gate=True)
    else:
        config.update(num_householder=c.householder, use_forget_gate=c.is_gated, use_output_gate=True)
    return {**config, "deltamup": export.to_dict()}


def write_export(export: Export, path: str | Path, fmt: str = "yaml") -> Path:
    """Write as yaml, json, or fla (an fla config.json); returns the path."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "yaml":
        path.write_text(yaml.safe_dump(export.to_dict(), sort_keys=False))
    else:
        path.write_text(json.dumps(fla_config(export) if fmt == "fla" else export.to_dict(), indent=2) + "\n")
    return path
