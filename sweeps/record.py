"""The trial record: what one trial writes to DIR/results/<trial_id>.json, defined once, typed and versioned.

Schema `deltamup.trial/1`. On disk (and as a row of trials.parquet) the record is one flat JSON object; in Python it
is a TrialRecord whose `model`, `config` and `extra` mappings are flattened into columns:

    schema        "deltamup.trial/1" (a record without it is version 0: written before the schema existed)
    identity      trial_id, phase, run, parametrization, optimizer, width, lr, seed, hparams (the point's base
                  hyperparameters other than the LR as one label, "output_mult=2,init_mult=0.5"; "" without
                  hparams axes; parametrizations.hparams)
    model         every models.ModelConfig field but width (kind, depth, heads, householder, …)
    config        task (a name, or its spec as JSON text), data (its data's fingerprint, scaling.data.data_fingerprint:
                  a prepared corpus's tokens sha256, 16 hex digits; None where the task has none or the record
                  predates it), code (scaling.code.code_fingerprint: the sources of deltamup.kernels, .models,
                  .parametrizations and .scaling with torch's and Triton's versions, 16 hex digits; None where the
                  record predates it), versions (those versions, "torch 2.11.0; triton 3.6.0": what `deltamup code`
                  needs to find the commits behind `code`; None where the record predates it), max_steps,
                  batch_size, seq_len, beta1, beta2, workers (data-parallel ranks: resources.workers_per_trial),
                  sharding (theirs: "ddp" | "fsdp", resources.sharding) and every
                  scaling.train.TrainConfig field but optimizer, lr, seed, steps, betas (weight_decay, …)
    metrics       status ("ok" | "diverged" | "pruned" | "error"; any other text counts as not finished), error
                  (last line of the exception), diverged, diverged_step, final_train_loss, val_loss, smoothed_loss
                  (nats; +inf when diverged), clipped_fraction
    extra         any further result, flat: a column per key, its value a scalar or a list of scalars (a task's
                  metrics such as acc_test_len or acc@128, val_loss_h50, val_batch_losses: the final validation
                  loss on each of the eval.batches batches, whose mean is val_loss, …). A key the record does not
                  name lands here when a record is read, so new scalar results need no schema change.
    cost          steps, tokens, train_seconds, eval_seconds (validation at the horizons), tokens_per_s, params,
                  attempts (the failed attempts, + 1 for the one that finished), resumed_from_step (the steps the
                  finishing attempt took over from a checkpoint, scaling.checkpoint; 0: it trained in one go),
                  device, gpu_name (the GPU's model, "NVIDIA H100 80GB HBM3"; None on a CPU or where the record
                  predates it), threads, gpu_ids, gpu_share (the share of a GPU Ray gave the trial, 0.5 where two
                  shared one; a data-parallel trial's, 1.0 a worker; None on a CPU or where the record predates it),
                  node_id, started_at, finished_at (unix s), wall_seconds, gpu_util (%, filled in by
                  store.consolidate), tracebacks (names of the files in results/ holding each failed
                  attempt's traceback, over every run of the sweep), first_step_seconds (training loop start to the
                  end of its first step, synced: compile + autotune + one step), compile_cache_hits and
                  compile_cache_misses (the FX graph cache's, one per forward or backward graph the trial compiled;
                  0 and 0 when its process had the graph in memory; None without compile), kernel_configs (the
                  Triton launch config each kernel pass took in the trial's process, "pass config; …";
                  kernels.launch_configs; None without Triton kernels), peak_memory_gib (the most GPU memory the
                  trial's process held for tensors, torch.cuda.max_memory_reserved over training and evaluation, GiB;
                  None on a CPU)

from_row checks a parsed file: a JSON object; trial_id and status present and strings; every field it names of its
type (ints for ints, numbers for floats, a list of strings for gpu_ids and tracebacks); width ≥ 1 and lr > 0 where
given; a version-1 record also names its identity in full. Anything else is a ValueError naming the field. A
version-0 record gets None for what it lacks.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any

from deltamup.models import ModelConfig
from deltamup.scaling.train import TrainConfig

SCHEMA = "deltamup.trial/1"
FINISHED = ("ok", "diverged", "pruned")  # decided: never run again (pruned: stopped by an Optuna pruner)
IDENTITY = ("trial_id", "phase", "run", "parametrization", "optimizer", "width", "lr", "seed")
MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(ModelConfig) if f.name != "width")
CONFIG_FIELDS = ("task", "data", "code", "versions", "max_steps", "batch_size", "seq_len", "beta1", "beta2", "workers",
                 "sharding", *(f.name for f in dataclasses.fields(TrainConfig)
                   if f.name not in ("optimizer", "lr", "seed", "steps", "betas")))
METRICS = ("status", "error", "diverged", "diverged_step", "final_train_loss", "val_loss", "smoothed_loss",
           "clipped_fraction")
COST = ("steps", "tokens", "train_seconds", "eval_seconds", "tokens_per_s", "params", "attempts", "resumed_from_step",
        "device", "gpu_name", "threads", "gpu_ids", "gpu_share", "node_id", "started_at", "finished_at", "wall_seconds",
        "gpu_util", "tracebacks", "first_step_seconds", "compile_cache_hits", "compile_cache_misses", "kernel_configs",
        "peak_memory_gib")
Scalar = str | int | float | bool | None


def lr_text(lr: float) -> str:
    """The one text form of a learning rate: Python's shortest repr that reads back as the same float."""
    return repr(float(lr))


def trial_id(parametrization: str, optimizer: str, width: int, lr: float, seed: int) -> str:
    """A trial's id, e.g. "gdn-mup.adamw.w256.lr0.003.s0": distinct points always get distinct ids."""
    return f"{parametrization}.{optimizer}.w{width}.lr{lr_text(lr)}.s{seed}"


@dataclass
class TrialRecord:
    """One trial's row (fields in the module docstring)."""

    trial_id: str
    status: str
    phase: str | None = None
    run: int | None = None
    parametrization: str | None = None
    optimizer: str | None = None
    width: int | None = None
    lr: float | None = None
    seed: int | None = None
    hparams: str | None = None
    model: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    diverged: bool | None = None
    diverged_step: int | None = None
    final_train_loss: float | None = None
    val_loss: float | None = None
    smoothed_loss: float | None = None
    clipped_fraction: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    steps: int | None = None
    tokens: int | None = None
    train_seconds: float | None = None
    eval_seconds: float | None = None
    tokens_per_s: float | None = None
    params: int | None = None
    attempts: int | None = None
    resumed_from_step: int | None = None
    device: str | None = None
    gpu_name: str | None = None
    threads: int | None = None
    gpu_ids: list[str] | None = None
    gpu_share: float | None = None
    node_id: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    wall_seconds: float | None = None
    gpu_util: float | None = None
    tracebacks: list[str] | None = None
    first_step_seconds: float | None = None
    compile_cache_hits: int | None = None
    compile_cache_misses: int | None = None
    kernel_configs: str | None = None
    peak_memory_gib: float | None = None
    schema: str | None = SCHEMA

    @property
    def finished(self) -> bool:
        """Decided (ok, diverged or pruned): a resumed sweep never runs it again."""
        return self.status in FINISHED

    @property
    def key(self) -> str:
        """The trial id with its LR written exactly (lr_text of the `lr` field), so a record written when ids
        rounded the LR to 6 digits still matches its trial; the trial id itself where it has no LR part."""
        head, sep, _ = self.trial_id.rpartition(".lr")
        if not sep or self.lr is None or not self.trial_id.endswith(f".s{self.seed}"):
            return self.trial_id
        return f"{head}.lr{lr_text(self.lr)}.s{self.seed}"

    def trained(self, model: ModelConfig, batch_size: int, seq_len: int) -> bool:
        """Whether this trial trained `model` (its width and every model field the record holds) on batches of
        batch_size × seq_len tokens: a trial whose time or memory says what another of that model will take."""
        return (self.width == model.width and all(getattr(model, k, None) == v for k, v in self.model.items())
                and (self.config.get("batch_size"), self.config.get("seq_len")) == (batch_size, seq_len))

    def to_row(self) -> dict[str, Any]:
        """The flat JSON object: schema (None for version 0), identity, model, config, metrics, extra, cost."""
        row = {"schema": self.schema} | {k: getattr(self, k) for k in (*IDENTITY, "hparams")} | self.model
        row |= self.config
        row |= {k: getattr(self, k) for k in METRICS} | self.extra | {k: getattr(self, k) for k in COST}
        return row

    @classmethod
    def from_row(cls, row: Any) -> TrialRecord:
        """The record in a parsed JSON object (either version); ValueError naming the first bad field."""
        if not isinstance(row, dict):
            raise ValueError(f"expected a JSON object, got {type(row).__name__}")
        version = row.get("schema")
        if version is not None and version != SCHEMA:
            raise ValueError(f"'schema' is {version!r}; this deltamup reads {SCHEMA!r} and untagged records")
        for name in ("trial_id", "status", *(IDENTITY if version else ())):
            if row.get(name) is None:
                raise ValueError(f"'{name}' is missing")
        values: dict[str, Any] = {"model": {}, "config": {}, "extra": {}, "schema": version}
        for key, value in row.items():
            if key == "schema":
                continue
            if key in FIELD_TYPES:
                values[key] = _typed(key, value, FIELD_TYPES[key])
            else:
                group = "model" if key in MODEL_FIELDS else "config" if key in CONFIG_FIELDS else "extra"
                values[group][key] = _flat(key, value, lists=group == "extra")
        if values.get("width") is not None and values["width"] < 1:
            raise ValueError(f"'width' must be positive, got {values['width']}")
        if values.get("lr") is not None and not (math.isfinite(values["lr"]) and values["lr"] > 0):
            raise ValueError(f"'lr' must be a positive number, got {values['lr']}")
        return cls(**values)


FIELD_TYPES = {k: v for k, v in typing.get_type_hints(TrialRecord).items()
               if k not in ("model", "config", "extra", "schema")}  # the typed columns


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """The table's column order for rows of to_row(): the record's order, keys only some rows have placed by the
    first row that has them."""
    ordered: dict[str, None] = {}
    for row in rows:
        ordered |= dict.fromkeys(row)
    return list(ordered)


def _typed(name: str, value: Any, hint: Any) -> Any:
    """`value` checked against a field's type hint (X | None, int, float, str, bool, list[str])."""
    if value is None:
        return None
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    if base is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if typing.get_origin(base) is list:
        if isinstance(value, list) and all(isinstance(v, str | int) for v in value):
            return [str(v) for v in value]
    elif isinstance(value, base) and not (base is int and isinstance(value, bool)):
        return value
    kind = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(base, "a list of "
                                                                                                   "strings")
    raise ValueError(f"'{name}' must be {kind}, got {_short(value)}")


def _flat(name: str, value: Any, lists: bool) -> Any:
    """A column's value: a scalar (or, for extra results, a list of scalars)."""
    if isinstance(value, Scalar):
        return value
    if lists and isinstance(value, list) and all(isinstance(v, Scalar) for v in value):
        return value
    raise ValueError(f"'{name}' must be {'a scalar or a list of scalars' if lists else 'a scalar'}, "
                     f"got {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
