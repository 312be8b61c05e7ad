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
    eval: {batches: 4, horizons: [0.25, 0.5, 1.0]}             # val_loss_h25, val_loss_h50, val_loss (= _h100)
    resources: {cpu: 1, gpu: auto}                             # gpu: fraction | auto | {width: fraction}
                                                               # workers_per_trial: N | {width: N} (data-parallel)
                                                               # sharding: ddp | fsdp (data-parallel trials)
    failure: {retries: 1}
    checkpoint: {every_s: 300}                                 # save a running trial this often (s); 0: never
    search: grid                                               # or refine (`refine:`), optuna (`optuna:`)
    tracking: {mlflow: {experiment: quickstart}}               # or {wandb: {project: ...}}; TensorBoard always
    hparams: {output_mult: [0.5, 1, 2], init_mult: [1, 2]}     # optional: more grid axes (parametrizations.hparams);
                                                               # with search: optuna, optuna.hparams: {name: [lo, hi]}
    only: [{widths: [32], lrs: [1.0e-3]}, {widths: [64]}]      # optional: the grid's points in these cells only
                                                               # (a cell narrows grid and hparams axes alike)
    limits: {max_width: 65536}                                 # size limits (LimitSpec); raise one to go past it

docs/sweeps.md describes every key with an example.

A malformed field raises SpecError (a ValueError) naming it: "spec field 'lrs[1]': must be positive, got -0.1".
Sizes beyond `limits` are refused before anything starts, naming the limit and its override
(`--set limits.max_width=N`); sweeps/packing.py checks each trial's memory estimate against the declared resources.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import itertools
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
from deltamup.scaling.data_parallel import SHARDINGS
from deltamup.scaling.train import TrainConfig

from .record import trial_id

TRAIN_KEYS = ("schedule", "warmup_steps", "min_lr_ratio", "weight_decay", "grad_clip", "betas", "eps", "momentum",
              "nesterov", "bf16", "log_every", "compile")
GRID_AXES = ("parametrizations", "optimizers", "widths", "lrs", "seeds")
SEARCHES = ("grid", "refine", "optuna")
PRUNERS = ("median", "none")
TRACKERS = {"mlflow": ("tracking_uri", "experiment"), "wandb": ("project", "entity", "mode")}  # keys each takes
SPECS_DIR = Path(__file__).parent / "specs"  # the specs shipped with the package
MAX_NAME = 100  # characters of `name`: a plain folder name
MAX_MESSAGE = 300  # characters of a SpecError: a huge value is cut, not echoed


class SpecError(ValueError):
    """A spec field is missing, unknown, mistyped or out of range."""

    def __init__(self, path: str, problem: str) -> None:
        path = path if path.isprintable() else repr(path)[1:-1]  # one line, whatever the key
        message = " ".join(f"spec field '{path}': {problem}".splitlines())
        super().__init__(message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "...")


@dataclass(frozen=True)
class EvalSpec:
    batches: int = 8                 # validation batches, the same for every trial (drawn with seed 0)
    batch_size: int | None = None    # default: the training batch size
    smooth_last: float = 0.2         # smoothed_loss: EWM of the train loss over this last fraction of the steps
    smooth_span: int = 20            # EWM span, steps
    horizons: tuple[float, ...] = (0.25, 0.5, 1.0)  # fractions of the steps with a validation loss (1.0: val_loss)

    def horizon_steps(self, steps: int) -> dict[str, int]:
        """{record column: steps done when it is measured}, e.g. {"val_loss_h25": 15, ..., "val_loss_h100": 60};
        a step is round(fraction · steps), at least 1."""
        return {horizon_column(h): max(1, round(h * steps)) for h in self.horizons}


@dataclass(frozen=True)
class ResourceSpec:
    cpu: float = 1.0                          # CPUs per trial (= its torch threads)
    gpu: float | str | dict = "auto"          # GPU share per trial in [0, 1], "auto" (memory estimate), {width: f}
    gpu_memory_gb: float | None = None        # for "auto" when the driver sees no GPU itself (default 80)
    whole_gpu_params: float = 1.0e8           # "auto": models with at least this many parameters get a whole GPU
    min_gpu_fraction: float = 0.125           # "auto": at most 1/min_gpu_fraction trials share a GPU
    workers_per_trial: int | dict = 1         # N | {width: N}: N > 1 trains the trial data-parallel over N workers
                                              # (Ray Train, DDP or FSDP: sharding), each a whole GPU where its width
                                              # would get any GPU share (else a CPU worker, gloo) and `cpu` CPUs; the
                                              # spec's batch_size stays the global batch (each worker takes
                                              # batch_size / N of its rows); widths a mapping leaves out get 1
                                              # (docs/sweeps-ddp.md)
    sharding: str | dict = "ddp"              # data-parallel trials: ddp (a full replica per worker) | fsdp (the
                                              # model and optimizer state sharded over the workers) | {width: one of
                                              # them}, e.g. FSDP only for the widths a replica does not fit; widths a
                                              # mapping leaves out get ddp

    def workers(self, width: int) -> int:
        """Data-parallel workers of a trial at `width` (1: the trial trains in its own Tune actor)."""
        workers = self.workers_per_trial
        return workers.get(width, 1) if isinstance(workers, dict) else workers

    def sharding_of(self, width: int) -> str:
        """How the data-parallel workers of a trial at `width` hold the model: "ddp" or "fsdp"."""
        return self.sharding.get(width, "ddp") if isinstance(self.sharding, dict) else self.sharding


@dataclass(frozen=True)
class FailureSpec:
    retries: int = 1                 # Ray reruns a failed trial this many times (a fresh worker each), then it is
                                     # recorded as error; every attempt's traceback is kept in results/


@dataclass(frozen=True)
class CheckpointSpec:
    every_s: float = 300.0           # a running trial saves its state to DIR/partial/<trial_id>.pt at the first log
                                     # boundary this many seconds after its previous save; a rerun (a retry, a
                                     # resume) continues from it; 0: no checkpoints


@dataclass(frozen=True)
class LimitSpec:
    """Sizes refused before anything starts (absurd values would spend minutes allocating or expanding the grid)."""

    max_width: int = 65536
    max_depth: int = 256
    max_heads: int = 1024
    max_steps: int = 10_000_000
    max_batch_tokens: int = 2**24    # batch_size × seq_len (and eval.batch_size × seq_len)
    max_trials: int = 100_000        # the grid's size, plus Optuna's trials
    check_memory: bool = True        # sweeps/packing.py: each trial's memory estimate must fit the declared resources


def horizon_column(fraction: float) -> str:
    """The record column of a horizon: 0.25 → "val_loss_h25" (whole percent of the steps)."""
    return f"val_loss_h{round(fraction * 100)}"


@dataclass(frozen=True)
class RefineSpec:
    factor: float = 2 ** 0.5         # LR ratio between neighbouring refine points, in (1, 2]
    points: int = 2                  # LRs each side of a width's grid optimum: optimum · factor^k, |k| ≤ points
    seeds: tuple[int, ...] = (0, 1, 2)  # every refine LR runs with each of these seeds


@dataclass(frozen=True)
class OptunaSpec:
    trials: int = 8                  # Optuna trials per (parametrization, optimizer, width), after the grid
    octaves: float = 1.0             # search log2(lr) within ± octaves of that width's best grid LR
    sampler: str = "tpe"             # tpe | random
    seed: int = 0
    startup_trials: int = 4          # TPE's random start-up (the grid trials it is warm-started with count too)
    pruner: str = "median"           # median | none: stop a trial whose horizon val loss is worse than the median
    pruner_startup_trials: int = 4   # no pruning before the study has this many finished trials (grid ones count)
    pruner_warmup_steps: int = 0     # no pruning at horizons of fewer steps
    hparams: dict = field(default_factory=dict)  # {name: [lo, hi]}: parametrizations.hparams Optuna searches with
                                                 # the LR, log-uniform (the grid runs at their defaults)


@dataclass(frozen=True)
class TrackingSpec:
    mlflow: dict | None = None       # {tracking_uri: ..., experiment: ...} (default experiment: the sweep's name)
    wandb: dict | None = None        # {project: ..., entity: ..., mode: online | offline | disabled}


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
        """Deterministic trial id, e.g. "gdn-mup.adamw.w256.lr0.003.s0" (record.trial_id: the exact LR), with
        ".output_mult2" appended per hparam."""
        extra = "".join(f".{name}{value:.6g}" for name, value in self.hparams)
        return trial_id(self.parametrization, self.optimizer, self.width, self.lr, self.seed) + extra

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
    checkpoint: CheckpointSpec = CheckpointSpec()
    search: str = "grid"
    refine: RefineSpec = RefineSpec()
    optuna: OptunaSpec = OptunaSpec()
    tracking: TrackingSpec = TrackingSpec()
    max_concurrent: int | None = None
    hparams: dict = field(default_factory=dict)   # name -> values: grid axes of parametrizations.hparams
    only: tuple[dict, ...] = ()      # cells, each {axis: values} narrowing some GRID_AXES or hparams axes: the grid
                                     # is their union
    limits: LimitSpec = LimitSpec()

    def model_config(self, width: int) -> ModelConfig:
        return ModelConfig(**{**self.model, "width": width})

    def train_config(self, point: TrialPoint) -> TrainConfig:
        train = {**self.train, **{k: v for k, v in point.hparams if k == "weight_decay"}}
        return TrainConfig(optimizer=point.optimizer, lr=point.lr, steps=self.steps, seed=point.seed, **train)

    def grid(self) -> list[TrialPoint]:
        """The product of the axes (parametrizations, optimizers, widths, lrs, seeds, hparams, in that nesting);
        with `only`, the union of its cells' products, each cell's axes (grid or hparams) narrowed to the values it
        names (first occurrence kept, in cell order)."""
        names = [k for k in HPARAMS if k in self.hparams]
        points: dict[TrialPoint, None] = {}
        for cell in self.only or ({},):
            axes = [cell.get(axis, getattr(self, axis)) for axis in GRID_AXES]
            combos = [tuple(zip(names, values))
                      for values in itertools.product(*(cell.get(k, self.hparams[k]) for k in names))]
            points.update((TrialPoint(*values, h), None) for values in itertools.product(*axes) for h in combos)
        return list(points)

    def to_dict(self) -> dict:
        """The spec as plain data (YAML-writable), train keys flat as in the file."""
        data = dataclasses.asdict(self)
        data.update(data.pop("train"))
        for key in ("hparams", "only"):
            if not data[key]:
                del data[key]  # a spec without them reads as it did before they existed
        return _plain(data)


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively; mapping keys as they are (a JSON round trip would make per-width keys strings)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


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
    model.vocab_size) without needing the task's data or its tracking packages on this machine, e.g. to report a
    sweep run elsewhere."""
    known = {f.name for f in dataclasses.fields(SweepSpec)} - {"train"} | set(TRAIN_KEYS)
    for key in raw:
        if key not in known:
            raise SpecError(str(key), f"unknown key (known: {', '.join(sorted(known))})")
    hints, train_hints = typing.get_type_hints(SweepSpec), typing.get_type_hints(TrainConfig)
    values: dict[str, Any] = {"train": {}}
    for key, value in raw.items():
        if key in TRAIN_KEYS:
            values["train"][key] = _typed(value, train_hints[key], key)
        elif key in ("eval", "resources", "failure", "checkpoint", "refine", "optuna", "tracking", "limits"):
            values[key] = _section(hints[key], value, key)
            if key == "optuna":
                values[key] = dataclasses.replace(values[key], hparams=_ranges(values[key].hparams))
        elif key == "lrs":
            values[key] = _lrs(value)
        elif key == "hparams":
            values[key] = _hparams(value)
        elif key == "only":
            values[key] = _only(value)
        elif key == "model":
            values[key] = _typed(value, dict, key)
        elif key == "task":
            if not (isinstance(value, str) or isinstance(value, dict) and isinstance(value.get("name"), str)):
                raise SpecError(key, f"expected a task name or {{name: …, options}}, got {value!r}")
            values[key] = value
        else:
            values[key] = _typed(value, hints[key], key)
    for key in ("widths", "lrs", "steps"):
        if key not in values:
            raise SpecError(key, "required")
    gpu = values.get("resources", ResourceSpec()).gpu
    if isinstance(gpu, dict):  # a spec as run (JSON-safe) has the widths as text keys
        gpu = {int(k) if isinstance(k, str) and k.isascii() and k.isdigit() else k: v for k, v in gpu.items()}
        values["resources"] = dataclasses.replace(values["resources"], gpu=gpu)
    spec = SweepSpec(**values)
    _check(spec)
    if not open_task:
        return spec
    _check_tracking_packages(spec.tracking)
    return _with_task_vocab(spec)


def _with_task_vocab(spec: SweepSpec) -> SweepSpec:
    """The task checked; model.vocab_size, when the spec leaves it out, set to the task's vocabulary (which may
    open the task's data: the spec as run then records it, so re-reading that spec does not, unless the task pins
    its data: a corpus's tokens_sha256 is checked against the data each time the spec is read)."""
    task = _named("task", get_task, spec.task)
    if isinstance(spec.task, dict) and "tokens_sha256" in spec.task:  # a pinned corpus: checked before any work
        _named("task", lambda: task.vocab_size)
    if "vocab_size" in spec.model:
        return spec
    vocab = _named("task", lambda: task.vocab_size)
    return dataclasses.replace(spec, model={**spec.model, "vocab_size": vocab})


def _check(spec: SweepSpec) -> None:
    _check_name(spec.name)
    _check_limits(spec)
    for axis in GRID_AXES:
        values = getattr(spec, axis)
        if not values:
            raise SpecError(axis, "must not be empty")
        if len(set(values)) != len(values):
            raise SpecError(axis, f"has duplicates: {list(values)}")
    _check_near("lrs", spec.lrs)
    for name, values in spec.hparams.items():
        _check_near(f"hparams.{name}", values)
    for i, width in enumerate(spec.widths):
        if width < 1:
            raise SpecError(f"widths[{i}]", f"must be positive, got {width}")
    for i, name in enumerate(spec.parametrizations):
        _named(f"parametrizations[{i}]", parametrizations.get, name)
    for i, name in enumerate(spec.optimizers):
        _named(f"optimizers[{i}]", parametrizations.check_optimizer, name)
    for name, value in (("steps", spec.steps), ("batch_size", spec.batch_size), ("seq_len", spec.seq_len),
                        ("eval.batches", spec.eval.batches), ("eval.smooth_span", spec.eval.smooth_span),
                        ("refine.points", spec.refine.points), ("optuna.trials", spec.optuna.trials)):
        if value < 1:
            raise SpecError(name, f"must be positive, got {value}")
    if spec.eval.batch_size is not None and spec.eval.batch_size < 1:
        raise SpecError("eval.batch_size", f"must be positive, got {spec.eval.batch_size}")
    if spec.failure.retries < 0:
        raise SpecError("failure.retries", f"must not be negative, got {spec.failure.retries}")
    if spec.checkpoint.every_s < 0:
        raise SpecError("checkpoint.every_s", f"must be ≥ 0 seconds (0: no checkpoints), "
                        f"got {spec.checkpoint.every_s}")
    if not 0 < spec.eval.smooth_last <= 1:
        raise SpecError("eval.smooth_last", f"must be in (0, 1], got {spec.eval.smooth_last}")
    if spec.search not in SEARCHES:
        raise SpecError("search", f"unknown search {spec.search!r}; choose one of {', '.join(SEARCHES)}")
    _check_horizons(spec.eval.horizons)
    _check_refine(spec.refine)
    _check_optuna(spec.optuna)
    _check_tracking(spec.tracking)
    if spec.hparams and spec.search != "grid":
        raise SpecError("hparams", "hyperparameter axes are grid axes: refine and Optuna tune the learning rate "
                        "only (search: grid)")
    _check_only(spec)
    if spec.optuna.hparams and spec.search != "optuna":
        raise SpecError("optuna.hparams", "Optuna searches these with the LR: needs search: optuna (grid axes: "
                        "hparams)")
    if "weight_decay" in spec.hparams and "weight_decay" in spec.train:
        raise SpecError("weight_decay", "given both as a value and as an hparams axis: keep one")
    _check_model(spec)
    _check_train(spec)
    _check_resources(spec.resources, spec.widths)
    _check_workers(spec)


def _check_horizons(horizons: tuple[float, ...]) -> None:
    for i, h in enumerate(horizons):
        if not 0 < h <= 1:
            raise SpecError(f"eval.horizons[{i}]", f"must be a fraction of the steps in (0, 1], got {h}")
        if abs(h * 100 - round(h * 100)) > 1e-9:
            raise SpecError(f"eval.horizons[{i}]", f"must be a whole percent of the steps (it names the column "
                            f"val_loss_hNN), got {h}")
    if list(horizons) != sorted(set(horizons)):
        raise SpecError("eval.horizons", f"must be increasing without duplicates, got {list(horizons)}")
    if not horizons or horizons[-1] != 1.0:
        raise SpecError("eval.horizons", f"must end with 1.0 (the final val_loss), got {list(horizons)}")


def _check_refine(refine: RefineSpec) -> None:
    if not 1 < refine.factor <= 2:
        raise SpecError("refine.factor", f"must be in (1, 2] (√2 ≈ 1.414 halves a ×2 grid's step), "
                        f"got {refine.factor}")
    if not refine.seeds:
        raise SpecError("refine.seeds", "must not be empty")
    if len(set(refine.seeds)) != len(refine.seeds):
        raise SpecError("refine.seeds", f"has duplicates: {list(refine.seeds)}")


def _check_optuna(optuna: OptunaSpec) -> None:
    if optuna.sampler not in ("tpe", "random"):
        raise SpecError("optuna.sampler", f"unknown sampler {optuna.sampler!r}; choose tpe or random")
    if optuna.pruner not in PRUNERS:
        raise SpecError("optuna.pruner", f"unknown pruner {optuna.pruner!r}; choose {' or '.join(PRUNERS)}")
    for name in ("startup_trials", "pruner_startup_trials", "pruner_warmup_steps"):
        if getattr(optuna, name) < 0:
            raise SpecError(f"optuna.{name}", f"must not be negative, got {getattr(optuna, name)}")
    if optuna.sampler == "tpe" and optuna.startup_trials >= optuna.trials:
        raise SpecError("optuna.startup_trials", f"{optuna.startup_trials} random start-up trials leave none of the "
                        f"{optuna.trials} trials to TPE: raise optuna.trials above it, or lower it")


def _check_tracking(tracking: TrackingSpec) -> None:
    for name, keys in TRACKERS.items():
        settings = getattr(tracking, name)
        if settings is None:
            continue
        for key, value in settings.items():
            if key not in keys:
                raise SpecError(f"tracking.{name}.{key}", f"unknown key (known: {', '.join(keys)})")
            if not isinstance(value, str) or not value:
                raise SpecError(f"tracking.{name}.{key}", f"expected a non-empty string, got {value!r}")
    if tracking.wandb is not None:
        if "project" not in tracking.wandb:
            raise SpecError("tracking.wandb.project", "required")
        if tracking.wandb.get("mode", "online") not in ("online", "offline", "disabled"):
            raise SpecError("tracking.wandb.mode", f"choose online, offline or disabled, "
                            f"got {tracking.wandb['mode']!r}")


def _check_tracking_packages(tracking: TrackingSpec) -> None:
    """Each tracker the spec turns on needs its package where the sweep runs (checked here, on the driver)."""
    for name in TRACKERS:
        if getattr(tracking, name) is not None and importlib.util.find_spec(name) is None:
            raise SpecError(f"tracking.{name}", f"needs the {name} package, which is not installed: "
                            f"pip install {name}, or remove the key")
def _check_name(name: str) -> None:
    """`name` is a plain folder name (the default sweep directory is runs/sweeps/<name>)."""
    if not 0 < len(name) <= MAX_NAME:
        raise SpecError("name", f"must have 1–{MAX_NAME} characters, got {len(name)}")
    if name in (".", "..") or any(c in name for c in "/\\\0"):
        raise SpecError("name", f"must be a plain folder name (no '/', '\\', '..'), got {name!r}")


def _check_limits(spec: SweepSpec) -> None:
    """Sizes within spec.limits, checked before the grid is expanded."""
    limits = spec.limits
    model = {k: v for k, v in spec.model.items() if k in ("depth", "heads")}
    tokens = max(spec.batch_size, spec.eval.batch_size or 0) * spec.seq_len
    grid = math.prod(len(getattr(spec, axis)) for axis in GRID_AXES) * math.prod(map(len, spec.hparams.values()))
    groups = grid // max(1, len(spec.lrs) * len(spec.seeds))  # (parametrization, optimizer, width) triples
    after = {"optuna": spec.optuna.trials, "refine": (2 * spec.refine.points + 1) * len(spec.refine.seeds)}
    searched = after.get(spec.search, 0) * groups  # trials after the grid's
    checks = [("widths", max(spec.widths, default=0), "max_width"), ("steps", spec.steps, "max_steps"),
              ("batch_size", tokens, "max_batch_tokens"), ("<grid>", grid + searched, "max_trials")]
    checks += [(f"model.{k}", v, f"max_{k}") for k, v in model.items() if isinstance(v, int)]
    for path, value, limit in checks:
        if value > getattr(limits, limit):
            what = {"max_batch_tokens": "batch_size × seq_len", "max_trials": "trials"}.get(limit, "")
            raise SpecError(path, f"{what + ' ' if what else ''}{value:,} exceeds limits.{limit} = "
                            f"{getattr(limits, limit):,} (raise it with --set limits.{limit}=N if you mean it)")


def _check_near(path: str, values: tuple[float, ...]) -> None:
    """Distinct LRs (or hparams values) that agree to 6 significant digits are refused: tables, figures, trial ids
    written before ids held the exact LR, and hparams suffixes could not tell them apart."""
    ordered = sorted(values)
    for a, b in zip(ordered, ordered[1:]):
        if f"{a:.6g}" == f"{b:.6g}":
            raise SpecError(path, f"{a!r} and {b!r} agree to 6 significant digits: keep one")


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
    if not all(0 <= b < 1 for b in spec.train.get("betas", (0.9, 0.95))):
        raise SpecError("betas", f"must lie in [0, 1), got {list(spec.train['betas'])}")
    if spec.train.get("weight_decay", 0.0) < 0:
        raise SpecError("weight_decay", f"must not be negative, got {spec.train['weight_decay']}")
    for name in ("schedule", "compile"):  # TrainConfig's own check of each, named by its field
        if name in spec.train:
            _named(name, lambda field, value: TrainConfig(**{field: value}), name, spec.train[name])
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


def _check_workers(spec: SweepSpec) -> None:
    """workers_per_trial: positive integers for widths of the spec, each dividing batch_size; a data-parallel
    width's workers take whole GPUs, so its resources.gpu must be auto, 0 or 1; sharding is ddp or fsdp, for every
    width or per width of the spec."""
    workers, gpu, sharding = spec.resources.workers_per_trial, spec.resources.gpu, spec.resources.sharding
    for width, how in sharding.items() if isinstance(sharding, dict) else [(None, sharding)]:
        where = "resources.sharding" + ("" if width is None else f".{width}")
        if width is not None and width not in spec.widths:
            raise SpecError(where, f"width {width} is not in widths {list(spec.widths)}")
        if how not in SHARDINGS:
            raise SpecError(where, f"expected one of {', '.join(SHARDINGS)}, got {how!r}")
    for width, n in workers.items() if isinstance(workers, dict) else [(None, workers)]:
        where = "resources.workers_per_trial" + ("" if width is None else f".{width}")
        if width is not None and width not in spec.widths:
            raise SpecError(where, f"width {width} is not in widths {list(spec.widths)}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise SpecError(where, f"expected a positive number of workers, got {n!r}")
        if spec.batch_size % n:
            raise SpecError(where, f"batch_size {spec.batch_size} does not split into {n} equal shards: the batch is "
                            "the global one, each worker takes batch_size / workers of its rows")
    for width in spec.widths:
        share = gpu.get(width) if isinstance(gpu, dict) else gpu
        if spec.resources.workers(width) > 1 and share not in ("auto", 0, 1):
            raise SpecError("resources.gpu", f"width {width} trains on {spec.resources.workers(width)} workers, "
                            f"each a whole GPU or none: its GPU share must be auto, 0 or 1, got {share!r}")


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


def _only(value: Any) -> tuple[dict[str, tuple], ...]:
    """A list of cells, each a mapping of some GRID_AXES or HPARAMS to lists (checked against the spec's axes by
    _check_only)."""
    if not isinstance(value, (list, tuple)):
        raise SpecError("only", f"expected a list of cells ({{widths: [...], lrs: [...], ...}}), got {value!r}")
    hints = typing.get_type_hints(SweepSpec)
    cells = []
    for i, cell in enumerate(value):
        if not isinstance(cell, dict) or not cell:
            raise SpecError(f"only[{i}]", f"expected a mapping of grid axes to lists, got {cell!r}")
        for axis in cell:
            if axis not in GRID_AXES + HPARAMS:
                raise SpecError(f"only[{i}].{axis}", f"not a grid axis (known: {', '.join(GRID_AXES + HPARAMS)})")
        cells.append({axis: _typed(values, hints[axis] if axis in GRID_AXES else tuple[float, ...],
                                   f"only[{i}].{axis}") for axis, values in cell.items()})
    return tuple(cells)


def _check_only(spec: SweepSpec) -> None:
    """Each cell's values are distinct values of the spec's own axis (the cells select grid points, so that the
    spec's axes still hold every width, LR, … that runs); Optuna's groups come from the whole axes, so no cells
    with it."""
    if spec.only and spec.search == "optuna":
        raise SpecError("only", "cells select grid points; Optuna searches every (parametrization, optimizer, "
                        "width) of the axes: use search: grid or refine")
    for i, cell in enumerate(spec.only):
        for axis, values in cell.items():
            if not values or len(set(values)) != len(values):
                raise SpecError(f"only[{i}].{axis}", f"needs distinct values, got {list(values)}")
            spec_values = getattr(spec, axis) if axis in GRID_AXES else spec.hparams.get(axis, ())
            outside = [v for v in values if v not in spec_values]
            if outside:
                where = axis if axis in GRID_AXES else f"hparams.{axis}"
                raise SpecError(f"only[{i}].{axis}", f"{outside[0]!r} is not one of the spec's {where} "
                                f"{list(spec_values)}: a cell selects points of the grid")


def _ranges(value: dict) -> dict[str, tuple[float, float]]:
    """optuna.hparams: {name: [lo, hi]} of parametrizations.hparams, 0 < lo < hi (searched log-uniform)."""
    out = {}
    for name, bounds in value.items():
        path = f"optuna.hparams.{name}"
        if name not in HPARAMS:
            raise SpecError(path, f"unknown hyperparameter (known: {', '.join(HPARAMS)})")
        lo, hi = _typed(bounds, tuple[float, float], path)
        if not 0 < lo < hi:
            raise SpecError(path, f"needs [lo, hi] with 0 < lo < hi (searched log-uniform), got {[lo, hi]}")
        for end in (lo, hi):
            _named(path, check_hparam, name, end)
        out[name] = (lo, hi)
    return out


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
    if hint is float and (isinstance(value, int | float | str) and not isinstance(value, bool)):
        try:
            number = float(value)  # YAML reads 1e-3 (no dot) as a string
        except ValueError:
            raise SpecError(path, f"expected a number, got {value!r}") from None
        if not math.isfinite(number):
            raise SpecError(path, f"expected a finite number, got {value!r}")
        return number
    if hint is dict and isinstance(value, dict):
        return value
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise SpecError(path, f"expected {hint.__name__}, got {value!r}")
    return value


def _named(path: str, check: Any, *args: Any) -> Any:
    """check(*args), its ValueError (or TypeError: an option of the wrong type deep inside) re-raised as a
    SpecError naming `path`."""
    try:
        return check(*args)
    except SpecError:
        raise
    except (ValueError, TypeError) as e:
        raise SpecError(path, str(e)) from None
