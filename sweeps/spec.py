"""The sweep spec: a YAML file, parsed and checked field by field before anything starts.

    name: quickstart
    model: {kind: gdn, depth: 1, heads: 2, base_width: 32}     # any ModelConfig field but width
    task: sample                                               # or {name: sample, ...}: scaling.data.get_task
    widths: [32, 64]
    lrs: {log_range: [1.0e-3, 3.0e-2], num: 4}                 # or a list
    parametrizations: [sp, gdn-mup]
    optimizers: [adamw]
    seeds: [0]
    steps: 60
    batch_size: 8
    seq_len: 64
    warmup_steps: 6                                            # and any other TrainConfig field but lr/optimizer/seed
    eval: {batches: 4}
    resources: {cpu: 1, gpu: auto}                             # gpu: fraction | auto | {width: fraction}
    failure: {retries: 1}
    search: grid                                               # or optuna (see `optuna:`)
    hparams: {output_mult: [0.5, 1, 2], init_mult: [1, 2]}     # optional: more grid axes (parametrizations.hparams)

A malformed field raises SpecError (a ValueError) naming it: "spec field 'lrs[1]': must be positive, got -0.1".
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deltamup import parametrizations
from deltamup.models import ModelConfig
from deltamup.parametrizations.hparams import HPARAMS, check_hparam, label
from deltamup.scaling.data import get_task
from deltamup.scaling.train import TrainConfig

TRAIN_KEYS = ("schedule", "warmup_steps", "min_lr_ratio", "weight_decay", "grad_clip", "betas", "eps", "momentum",
              "nesterov", "bf16", "log_every", "compile")
GRID_AXES = ("parametrizations", "optimizers", "widths", "lrs", "seeds")
SEARCHES = ("grid", "optuna")
SPECS_DIR = Path(__file__).parent / "specs"  # the specs shipped with the package


class SpecError(ValueError):
    """A spec field is missing, unknown, mistyped or out of range."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"spec field '{path}': {problem}")


@dataclass(frozen=True)
class EvalSpec:
    batches: int = 8                 # validation batches, the same for every trial (drawn with seed 0)
    batch_size: int | None = None    # default: the training batch size
    smooth_last: float = 0.2         # smoothed_loss: EWM of the train loss over this last fraction of the steps
    smooth_span: int = 20            # EWM span, steps


@dataclass(frozen=True)
class ResourceSpec:
    cpu: float = 1.0                          # CPUs per trial (= its torch threads)
    gpu: float | str | dict = "auto"          # GPU share per trial in [0, 1], "auto" (memory estimate), {width: f}
    gpu_memory_gb: float | None = None        # for "auto" when the driver sees no GPU itself (default 80)
    whole_gpu_params: float = 1.0e8           # "auto": models with at least this many parameters get a whole GPU
    min_gpu_fraction: float = 0.125           # "auto": at most 1/min_gpu_fraction trials share a GPU


@dataclass(frozen=True)
class FailureSpec:
    retries: int = 1                 # a trial that raises is run again this many times, then recorded as error


@dataclass(frozen=True)
class OptunaSpec:
    trials: int = 6                  # Optuna trials per (parametrization, optimizer, width), after the grid
    octaves: float = 1.0             # search log2(lr) within ± octaves of that width's best grid LR
    sampler: str = "tpe"             # tpe | random
    seed: int = 0


@dataclass(frozen=True)
class TrialPoint:
    """One trial's coordinates in the sweep."""

    parametrization: str
    optimizer: str
    width: int
    lr: float
    seed: int
    hparams: tuple[tuple[str, float], ...] = ()   # (name, value) of the spec's hparams axes, in HPARAMS order

    @property
    def key(self) -> str:
        """Deterministic trial id, e.g. "gdn-mup.adamw.w256.lr0.003.s0" (".output_mult2" appended per hparam)."""
        extra = "".join(f".{name}{value:.6g}" for name, value in self.hparams)
        return f"{self.parametrization}.{self.optimizer}.w{self.width}.lr{self.lr:.6g}.s{self.seed}{extra}"

    @property
    def label(self) -> str:
        """The parametrization as reports tell trials apart: "gdn-mup", or "gdn-mup[output_mult=2]" with hparams."""
        text = label(dict(self.hparams))
        return f"{self.parametrization}[{text}]" if text else self.parametrization


@dataclass(frozen=True)
class SweepSpec:
    widths: tuple[int, ...]
    lrs: tuple[float, ...]
    steps: int
    name: str = "sweep"              # default directory: runs/sweeps/<name> (load(): the file's stem)
    model: dict = field(default_factory=lambda: {"kind": "gdn"})  # vocab_size: the task's
    task: str | dict = "sample"
    parametrizations: tuple[str, ...] = ("gdn-mup",)
    optimizers: tuple[str, ...] = ("adamw",)
    seeds: tuple[int, ...] = (0,)
    batch_size: int = 8
    seq_len: int = 64
    train: dict = field(default_factory=dict)     # TRAIN_KEYS given in the spec (flat in the YAML)
    eval: EvalSpec = EvalSpec()
    resources: ResourceSpec = ResourceSpec()
    failure: FailureSpec = FailureSpec()
    search: str = "grid"
    optuna: OptunaSpec = OptunaSpec()
    max_concurrent: int | None = None
    hparams: dict = field(default_factory=dict)   # name -> values: grid axes of parametrizations.hparams

    def model_config(self, width: int) -> ModelConfig:
        return ModelConfig(**{**self.model, "width": width})

    def train_config(self, point: TrialPoint) -> TrainConfig:
        train = {**self.train, **{k: v for k, v in point.hparams if k == "weight_decay"}}
        return TrainConfig(optimizer=point.optimizer, lr=point.lr, steps=self.steps, seed=point.seed, **train)

    def grid(self) -> list[TrialPoint]:
        names = [k for k in HPARAMS if k in self.hparams]
        combos = [tuple(zip(names, values)) for values in itertools.product(*(self.hparams[k] for k in names))]
        return [TrialPoint(p, o, w, lr, s, h) for p in self.parametrizations for o in self.optimizers
                for w in self.widths for lr in self.lrs for s in self.seeds for h in combos]

    def to_dict(self) -> dict:
        """The spec as plain data (YAML-writable), train keys flat as in the file."""
        data = dataclasses.asdict(self)
        data.update(data.pop("train"))
        if not data["hparams"]:
            del data["hparams"]  # a spec without hparams axes reads as it did before they existed
        return json.loads(json.dumps(data))  # tuples → lists


def load(path: str | Path, overrides: list[str] = ()) -> SweepSpec:
    """The spec in a YAML file, with `overrides` ("steps=200", "eval.batches=2", "lrs=[1e-3, 3e-3]") applied."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ValueError(f"cannot read spec {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"spec {path} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise SpecError("<top>", f"expected a mapping of fields, got {type(raw).__name__}")
    raw = {"name": path.stem, **raw}
    for override in overrides:
        apply_override(raw, override)
    return parse(raw)


def apply_override(raw: dict[str, Any], override: str) -> None:
    """Sets KEY=VALUE (VALUE read as YAML; KEY dotted for nested mappings) in `raw`."""
    key, sep, text = override.partition("=")
    if not sep or not key:
        raise ValueError(f"--set expects KEY=VALUE, got {override!r}")
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise SpecError(key, f"'{part}' is not a mapping")
    try:
        node[leaf] = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ValueError(f"--set {key}: value {text!r} is not valid YAML") from None


def parse(raw: dict[str, Any], open_task: bool = True) -> SweepSpec:
    """A checked SweepSpec from plain data (a parsed YAML file). open_task=False reads a spec as run (which records
    model.vocab_size) without needing the task's data on this machine, e.g. to report a sweep run elsewhere."""
    known = {f.name for f in dataclasses.fields(SweepSpec)} - {"train"} | set(TRAIN_KEYS)
    for key in raw:
        if key not in known:
            raise SpecError(str(key), f"unknown key (known: {', '.join(sorted(known))})")
    hints, train_hints = typing.get_type_hints(SweepSpec), typing.get_type_hints(TrainConfig)
    values: dict[str, Any] = {"train": {}}
    for key, value in raw.items():
        if key in TRAIN_KEYS:
            values["train"][key] = _typed(value, train_hints[key], key)
        elif key in ("eval", "resources", "failure", "optuna"):
            values[key] = _section(hints[key], value, key)
        elif key == "lrs":
            values[key] = _lrs(value)
        elif key == "hparams":
            values[key] = _hparams(value)
        elif key in ("model", "task"):
            values[key] = value
        else:
            values[key] = _typed(value, hints[key], key)
    for key in ("widths", "lrs", "steps"):
        if key not in values:
            raise SpecError(key, "required")
    spec = SweepSpec(**values)
    _check(spec)
    return _with_task_vocab(spec) if open_task else spec


def _with_task_vocab(spec: SweepSpec) -> SweepSpec:
    """The task checked; model.vocab_size, when the spec leaves it out, set to the task's vocabulary (which may
    open the task's data: the spec as run then records it, so re-reading that spec does not)."""
    task = _named("task", get_task, spec.task)
    if "vocab_size" in spec.model:
        return spec
    vocab = _named("task", lambda: task.vocab_size)
    return dataclasses.replace(spec, model={**spec.model, "vocab_size": vocab})


def _check(spec: SweepSpec) -> None:
    for axis in GRID_AXES:
        values = getattr(spec, axis)
        if not values:
            raise SpecError(axis, "must not be empty")
        if len(set(values)) != len(values):
            raise SpecError(axis, f"has duplicates: {list(values)}")
    for i, width in enumerate(spec.widths):
        if width < 1:
            raise SpecError(f"widths[{i}]", f"must be positive, got {width}")
    for i, name in enumerate(spec.parametrizations):
        _named(f"parametrizations[{i}]", parametrizations.get, name)
    for i, name in enumerate(spec.optimizers):
        _named(f"optimizers[{i}]", parametrizations.check_optimizer, name)
    for name, value in (("steps", spec.steps), ("batch_size", spec.batch_size), ("seq_len", spec.seq_len),
                        ("eval.batches", spec.eval.batches), ("eval.smooth_span", spec.eval.smooth_span),
                        ("optuna.trials", spec.optuna.trials)):
        if value < 1:
            raise SpecError(name, f"must be positive, got {value}")
    if spec.failure.retries < 0:
        raise SpecError("failure.retries", f"must not be negative, got {spec.failure.retries}")
    if not 0 < spec.eval.smooth_last <= 1:
        raise SpecError("eval.smooth_last", f"must be in (0, 1], got {spec.eval.smooth_last}")
    if spec.search not in SEARCHES:
        raise SpecError("search", f"unknown search {spec.search!r}; choose one of {', '.join(SEARCHES)}")
    if spec.hparams and spec.search != "grid":
        raise SpecError("hparams", "hyperparameter axes are grid axes: Optuna tunes the learning rate only "
                        "(search: grid)")
    if "weight_decay" in spec.hparams and "weight_decay" in spec.train:
        raise SpecError("weight_decay", "given both as a value and as an hparams axis: keep one")
    if spec.optuna.sampler not in ("tpe", "random"):
        raise SpecError("optuna.sampler", f"unknown sampler {spec.optuna.sampler!r}; choose tpe or random")
    _check_model(spec)
    _check_train(spec)
    _check_resources(spec.resources, spec.widths)


def _check_model(spec: SweepSpec) -> None:
    if not isinstance(spec.model, dict):
        raise SpecError("model", f"expected a mapping of ModelConfig fields, got {type(spec.model).__name__}")
    hints = typing.get_type_hints(ModelConfig)
    for key, value in spec.model.items():
        if key == "width" or key not in hints:
            raise SpecError(f"model.{key}", "unknown key (widths come from 'widths'; known: "
                            f"{', '.join(k for k in hints if k != 'width')})")
        _typed(value, hints[key], f"model.{key}")
    for width in spec.widths:
        _named("model", spec.model_config, width)


def _check_train(spec: SweepSpec) -> None:
    for i, lr in enumerate(spec.lrs):
        if not (math.isfinite(lr) and lr > 0):
            raise SpecError(f"lrs[{i}]", f"must be positive, got {lr}")
    if spec.train.get("warmup_steps", 0) >= spec.steps:
        raise SpecError("warmup_steps", f"{spec.train['warmup_steps']} leaves no step at the peak LR of "
                        f"{spec.steps} steps")
    if spec.train.get("weight_decay", 0.0) < 0:
        raise SpecError("weight_decay", f"must not be negative, got {spec.train['weight_decay']}")
    point = spec.grid()[0]
    _named("<training>", spec.train_config, point)


def _check_resources(resources: ResourceSpec, widths: tuple[int, ...]) -> None:
    if resources.cpu <= 0:
        raise SpecError("resources.cpu", f"must be positive, got {resources.cpu}")
    gpu = resources.gpu
    fractions = gpu.items() if isinstance(gpu, dict) else [] if gpu == "auto" else [(None, gpu)]
    if isinstance(gpu, str) and gpu != "auto":
        raise SpecError("resources.gpu", f"expected a number, 'auto' or {{width: fraction}}, got {gpu!r}")
    for width, fraction in fractions:
        where = "resources.gpu" if width is None else f"resources.gpu.{width}"
        if width is not None and width not in widths:
            raise SpecError(where, f"width {width} is not in widths {list(widths)}")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise SpecError(where, f"expected a GPU fraction in [0, 1] (a trial trains on one device), "
                            f"got {fraction!r}")
    if isinstance(gpu, dict) and set(gpu) != set(widths):
        raise SpecError("resources.gpu", f"a per-width mapping needs every width: missing "
                        f"{sorted(set(widths) - set(gpu))}")
    if not 0 < resources.min_gpu_fraction <= 1:
        raise SpecError("resources.min_gpu_fraction", f"must be in (0, 1], got {resources.min_gpu_fraction}")


def _lrs(value: Any) -> tuple[float, ...]:
    """A list of LRs, or {log_range: [lo, hi], num: n}: n LRs evenly spaced in log between lo and hi."""
    if isinstance(value, dict):
        for key in value:
            if key not in ("log_range", "num"):
                raise SpecError(f"lrs.{key}", "unknown key (known: log_range, num)")
        if "log_range" not in value or "num" not in value:
            raise SpecError("lrs", "a range needs both log_range: [lo, hi] and num: n")
        lo, hi = _typed(value["log_range"], tuple[float, float], "lrs.log_range")
        num = _typed(value["num"], int, "lrs.num")
        if not (lo > 0 and hi >= lo and math.isfinite(hi)):
            raise SpecError("lrs.log_range", f"needs 0 < lo ≤ hi, got [{lo}, {hi}]")
        if num < 1 or (num == 1 and hi != lo):
            raise SpecError("lrs.num", f"needs num ≥ 2 for a range (1 when lo = hi), got {num}")
        if num == 1:
            return (lo,)
        step = math.log(hi / lo) / (num - 1)
        return tuple(float(f"{lo * math.exp(i * step):.6g}") for i in range(num))
    return _typed(value, tuple[float, ...], "lrs")


def _hparams(value: Any) -> dict[str, tuple[float, ...]]:
    """{name: [values]} of parametrizations.hparams: each a non-empty list without duplicates, each value in range."""
    if not isinstance(value, dict):
        raise SpecError("hparams", f"expected a mapping of hyperparameter -> list of values, got {value!r}")
    out = {}
    for name, values in value.items():
        if name not in HPARAMS:
            raise SpecError(f"hparams.{name}", f"unknown hyperparameter (known: {', '.join(HPARAMS)})")
        values = _typed(values, tuple[float, ...], f"hparams.{name}")
        if not values or len(set(values)) != len(values):
            raise SpecError(f"hparams.{name}", f"needs distinct values, got {list(values)}")
        for i, v in enumerate(values):
            _named(f"hparams.{name}[{i}]", check_hparam, name, v)
        out[name] = values
    return out


def _section(cls: type, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise SpecError(path, f"expected a mapping, got {type(value).__name__}")
    hints = typing.get_type_hints(cls)
    for key in value:
        if key not in hints:
            raise SpecError(f"{path}.{key}", f"unknown key (known: {', '.join(hints)})")
    return cls(**{key: _typed(v, hints[key], f"{path}.{key}") for key, v in value.items()})


def _typed(value: Any, hint: Any, path: str) -> Any:
    """`value` checked against a type hint (int, float, str, bool, X | None, tuple[X, ...], tuple[X, Y], dict);
    ints and numeric strings are accepted (and converted) where floats are expected; lists become tuples."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return _typed(value, option, path)
            except SpecError:
                continue
        names = " or ".join(getattr(a, "__name__", str(a)) for a in args).replace("NoneType", "null")
        raise SpecError(path, f"expected {names}, got {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise SpecError(path, f"expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise SpecError(path, f"expected a list of {len(args)}, got {value!r}")
        return tuple(_typed(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if hint is type(None):
        if value is not None:
            raise SpecError(path, f"expected null, got {value!r}")
        return None
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):  # YAML reads 1e-3 (no dot) as a string
        try:
            return float(value)
        except ValueError:
            raise SpecError(path, f"expected a number, got {value!r}") from None
    if hint is dict and isinstance(value, dict):
        return value
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise SpecError(path, f"expected {hint.__name__}, got {value!r}")
    return value


def _named(path: str, check: Any, *args: Any) -> Any:
    """check(*args), its ValueError re-raised as a SpecError naming `path`."""
    try:
        return check(*args)
    except SpecError:
        raise
    except ValueError as e:
        raise SpecError(path, str(e)) from None
