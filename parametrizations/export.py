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
    p = exp.parametrize(fla_model_any_width, base_model=fla_model_at_base_width, roles="fla")   # any width
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import yaml
from torch import nn

from deltamup.models import DeltaLM, ModelConfig, Multipliers, role_of
from deltamup.models.roles import Role

from .apply import Parametrized, parametrize
from .hparams import BaseHparams, check_hparam
from .registry import build_optimizer, check_optimizer, get, multipliers, resolve
from .rolemap import RoleMap

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
        return dict(parametrization=self.parametrization, optimizer=self.optimizer, lr=self.lr,
                    weight_decay=self.weight_decay, width_mult=self.width_mult, width=self.width,
                    **self.train_kwargs())

    def parametrize(self, model: nn.Module, base_model: nn.Module, delta_model: nn.Module | None = None,
                    roles: RoleMap | str | None = None, init: bool = True) -> Parametrized:
        """This export's parametrization and optimizer applied to any model of any width (parametrizations.parametrize),
        after checking that `base_model` is at this export's base width, where the tuned LR means what it meant;
        then `.build_optimizer(self.lr, self.weight_decay, **self.train_kwargs())` trains it."""
        p = parametrize(model, self.parametrization, self.optimizer, base_model=base_model, delta_model=delta_model,
                        roles=roles, init=init)
        if p.base_width != self.base_width:
            raise ValueError(f"the base model has width {p.base_width}; this export's rules are relative to base "
                             f"width {self.base_width}: build the base model at {self.base_width}")
        return p

    def train_kwargs(self) -> dict:
        """The optimizer settings the sweep used (betas, eps, momentum, nesterov) that the export carries."""
        return {k: (tuple(v) if k == "betas" else v) for k, v in self.train.items() if k in TRAIN_KEYS}

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


class ExportError(ValueError):
    """A field of an export document is missing, unknown, mistyped or out of range."""

    def __init__(self, path: str, problem: str) -> None:
        path = path if path.isprintable() else repr(path)[1:-1]  # one line, whatever the key
        super().__init__(f"export field '{path}': {problem}")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(doc: dict, key: str, path: str, low: float = 0.0, strict: bool = False,
            optional: bool = False) -> float | None:
    """doc[key] as a finite float ≥ low (> low when strict); ints are accepted."""
    value = doc.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < low or (strict and value == low):
        raise ExportError(path, f"must be a finite number {'>' if strict else '≥'} {low:g}, got {_short(value)}")
    return float(value)


def _count(doc: dict, key: str, path: str, low: int = 1) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ExportError(path, f"must be an integer ≥ {low}, got {_short(value)}")
    return value


def _mapping(value: object, path: str, keys: set[str] | None = None, required: bool = True) -> dict:
    """`value` as a mapping with string keys; with `keys`: no others, and (required) all of them."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ExportError(path, f"must be a mapping with text keys, got {_short(value)}")
    if keys is not None:
        unknown = sorted(set(value) - keys)
        if unknown:
            raise ExportError(f"{path}.{unknown[0]}" if path else unknown[0],
                              f"unknown key (known: {', '.join(sorted(keys))})")
        missing = sorted(keys - set(value)) if required else []
        if missing:
            raise ExportError(f"{path}.{missing[0]}" if path else missing[0], "missing")
    return value


def _plain(value: object, path: str) -> object:
    """Provenance values: plain data (text, numbers but NaN, booleans, null, lists and mappings of these)."""
    if isinstance(value, float) and math.isnan(value):
        raise ExportError(path, "must not be NaN")
    if isinstance(value, list):
        return [_plain(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _plain(v, f"{path}.{k}") for k, v in _mapping(value, path).items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ExportError(path, f"must be plain data, got {type(value).__name__}")


def _typed_fields(doc: dict, hints: dict, path: str) -> dict:
    """A dataclass's fields (int, float, str, bool, X | None, tuple[float, float]) checked by their type hints."""
    for key, value in doc.items():
        hint = hints[key]
        options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        ok = any(value is None if o is type(None) else
                 isinstance(value, list | tuple) and len(value) == 2 and all(
                     isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value)
                 if typing.get_origin(o) is tuple else
                 isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                 if o is float else isinstance(value, o) and not (o is int and isinstance(value, bool))
                 for o in options)
        if not ok:
            names = " or ".join(getattr(o, "__name__", "a pair of numbers") for o in options).replace("NoneType",
                                                                                                      "null")
            raise ExportError(f"{path}.{key}", f"must be {names}, got {_short(value)}")
    return doc


ROLE_FIELDS = {f.name for f in dataclasses.fields(RoleExport)}
TUNED_FIELDS = {"lr", "init_std", "weight_decay"}
# the sweep's other training settings an export's `train` may carry (scaling.train.TrainConfig's, which lies above
# this layer: tests/test_mutations.py keeps the two in step) and build_optimizer's eps
TRAIN_TYPES = {"schedule": str, "warmup_steps": int, "min_lr_ratio": float, "weight_decay": float,
               "grad_clip": float | None, "betas": tuple[float, float], "momentum": float, "nesterov": bool,
               "bf16": bool, "log_every": int, "compile": bool | str, "eps": float}


def _role(doc: object, path: str) -> RoleExport:
    g = _mapping(doc, path, ROLE_FIELDS, required=False)
    _mapping({k: v for k, v in g.items() if k != "eps_mult"}, path, ROLE_FIELDS - {"eps_mult"})  # eps_mult: optional
    eps_mult = _number(g, "eps_mult", f"{path}.eps_mult", strict=True, optional=True)
    for key in ("lr", "lr_mult", "weight_decay", "wd_mult"):
        _number(g, key, f"{path}.{key}")
    tuned = _mapping(g["tuned"], f"{path}.tuned", TUNED_FIELDS)
    for key in ("lr", "weight_decay"):
        _number(tuned, key, f"{path}.tuned.{key}")
    for where in (g, tuned):
        _number(where, "init_std", f"{path}{'.tuned' if where is tuned else ''}.init_std", strict=True, optional=True)
    return RoleExport(**{**g, **{k: float(g[k]) for k in ("lr", "lr_mult", "weight_decay", "wd_mult")},
                         "init_std": None if g["init_std"] is None else float(g["init_std"]),
                         "tensors": _count(g, "tensors", f"{path}.tensors", 0),
                         "elements": _count(g, "elements", f"{path}.elements", 0),
                         "tuned": {k: None if v is None else float(v) for k, v in tuned.items()},
                         "eps_mult": 1.0 if eps_mult is None else eps_mult})


def from_dict(doc: dict) -> Export:
    """An Export from a parsed document (or an fla config.json carrying one under "deltamup"), every field checked
    (types, ranges, known names, no unknown keys); ExportError (a ValueError) naming the field otherwise."""
    doc = doc.get("deltamup", doc) if isinstance(doc, dict) else doc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"not a deltamup export (field 'schema' is {_short(found)}, expected {SCHEMA!r})")
    names = {f.name for f in dataclasses.fields(Export)}
    optional = {"train", "provenance", "hparams"}
    _mapping({k: v for k, v in doc.items() if k not in optional}, "", names - optional)
    _mapping(doc, "", names, required=False)
    for key, check in (("parametrization", get), ("optimizer", check_optimizer)):
        if not isinstance(doc[key], str):
            raise ExportError(key, f"must be a name, got {_short(doc[key])}")
        try:
            check(doc[key])
        except ValueError as e:
            raise ExportError(key, str(e)) from None
    width, base_width = _count(doc, "width", "width"), _count(doc, "base_width", "base_width")
    tuned_width = _count(doc, "tuned_width", "tuned_width")
    width_mult = _number(doc, "width_mult", "width_mult", strict=True)
    if not math.isclose(width_mult, width / base_width, rel_tol=REL_TOL):
        raise ExportError("width_mult", f"{width_mult:g} is not width / base_width = {width / base_width:g}")
    lr = _number(doc, "lr", "lr", strict=True)
    weight_decay = _number(doc, "weight_decay", "weight_decay")
    model = _typed_fields(_mapping(doc["model"], "model", {f.name for f in dataclasses.fields(ModelConfig)},
                                   required=False), typing.get_type_hints(ModelConfig), "model")
    for key, value in (("width", width), ("base_width", base_width)):
        if model.get(key, getattr(ModelConfig, key)) != value:
            raise ExportError(f"model.{key}", f"{model.get(key)} differs from the export's {key} {value}")
    try:
        ModelConfig(**model).with_width(tuned_width)
    except ValueError as e:
        raise ExportError("model", str(e)) from None
    mults = {}
    for key in ("multipliers", "tuned_multipliers"):
        fields = {f.name for f in dataclasses.fields(Multipliers)}
        mults[key] = {k: _number(doc[key], k, f"{key}.{k}", strict=True) for k in _mapping(doc[key], key, fields)}
    groups = {role: _role(g, f"groups.{role}") for role, g in _mapping(doc["groups"], "groups",
                                                                        {str(r) for r in Role}, False).items()}
    if not groups:
        raise ExportError("groups", "must name at least one role")
    train = _typed_fields(_mapping(doc.get("train", {}), "train", set(TRAIN_TYPES), required=False), TRAIN_TYPES,
                          "train")
    provenance = _plain(_mapping(doc.get("provenance", {}), "provenance"), "provenance")
    given = _mapping(doc.get("hparams", {}), "hparams")
    hparams = {k: _number(given, k, f"hparams.{k}") for k in given}
    for key, value in hparams.items():
        try:
            check_hparam(key, value)
        except ValueError as e:
            raise ExportError(f"hparams.{key}", str(e)) from None
    return Export(parametrization=doc["parametrization"], optimizer=doc["optimizer"], width=width,
                  base_width=base_width, width_mult=width_mult, lr=lr, weight_decay=weight_decay,
                  tuned_width=tuned_width, model=model, multipliers=mults["multipliers"],
                  tuned_multipliers=mults["tuned_multipliers"], groups=groups,
                  train={k: list(v) if isinstance(v, tuple) else v for k, v in train.items()}, provenance=provenance,
                  hparams=hparams)


def load_export(path: str | Path) -> Export:
    """Read an export written as YAML, JSON or an fla config.json (safe loaders only)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"export file {path} does not exist")
    text = path.read_text()
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"cannot parse {path}: {' '.join(str(e).split())[:200]}") from None
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
    return {**config, "deltamup_note": fla_note(export), "deltamup": export.to_dict()}


def fla_note(export: Export) -> str:
    """What an fla config.json cannot express of the export, said where a reader of the file sees it."""
    unexpressed = {k: v for k, v in export.multipliers.items() if v != 1}
    forward = (f" nor the forward multipliers ({', '.join(f'{k} × {v:g}' for k, v in unexpressed.items())})"
               if unexpressed else "")
    return (f"fla's config has no field for {export.parametrization}'s per-role learning rates and init stds{forward}: "
            "a model built from this file alone is a different model. Apply them with "
            "deltamup.parametrize(model, ..., roles='fla') or a param-groups file "
            "(deltamup.parametrizations.write_param_groups) and its PyTorch-only loader; see docs/api.md.")


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
