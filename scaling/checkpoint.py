"""Checkpoints of a training run (scaling.train.train's `checkpointing`): a run killed mid-way continues from its
last checkpoint, and its result equals the uninterrupted run's, bit for bit on a CPU.

One file holds what the loop needs to go on: the steps done, the model's and the optimizer's state dicts, the
TrainResult so far, torch's CPU RNG state (and the CUDA RNG state of the model's device), the caller's `extra` dict
and a fingerprint of the run's configuration. It is written atomically (a temporary file in the same folder, then
os.replace): a kill during a save leaves the previous checkpoint. Its size is about 12 bytes a parameter under AdamW
(float32 weights and Adam's two moments), 8 under SGD with momentum.

A model sharded with FSDP (its parameters are DTensors, scaling.data_parallel) is saved whole: every rank gathers
the full model and optimizer state dicts onto the CPU (torch.distributed.checkpoint.state_dict, collective) and one
rank writes them; every rank reads the file and keeps its own shards.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn
from torch.distributed.checkpoint import state_dict as dcp
from torch.distributed.tensor import DTensor

Result = TypeVar("Result")  # scaling.train.TrainResult (a dataclass)


@dataclass
class Checkpointing:
    """Save the run to `path` at the first log boundary `every_s` seconds (0: every one) after the previous save or
    the start, or, when `every_steps` is set, at the first log boundary `every_steps` steps after them (instead of by
    time: a run's saves then fall on the same steps however fast it goes), and continue from `path` when it holds a
    checkpoint of the same `fingerprint` (one of another is removed). `extra`: the caller's own state (plain data,
    e.g. the validation losses so far), saved with every checkpoint and updated in place from it when the run
    continues."""

    path: Path
    every_s: float = 300.0
    fingerprint: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    every_steps: int | None = None
    saved_at: float = field(default_factory=time.monotonic, init=False, repr=False)  # time.monotonic(), last save
    saved_step: int = field(default=0, init=False, repr=False)  # steps done at the last save (or the restore)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if not self.every_s >= 0:
            raise ValueError(f"every_s must be ≥ 0 seconds, got {self.every_s}")
        if self.every_steps is not None and self.every_steps < 1:
            raise ValueError(f"every_steps must be ≥ 1, got {self.every_steps}")

    def due(self, steps: int) -> bool:
        """Whether a save is due after `steps` steps."""
        if self.every_steps is not None:
            return steps - self.saved_step >= self.every_steps
        return time.monotonic() - self.saved_at >= self.every_s


def fingerprint(config: Mapping[str, Any]) -> str:
    """16 hex digits of the SHA-256 of `config` (plain data) as canonical JSON."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


FULL = dcp.StateDictOptions(full_state_dict=True, cpu_offload=True)  # a sharded model's state, whole, on the CPU


def sharded(model: nn.Module) -> bool:
    """Whether `model`'s parameters are sharded over ranks (FSDP's DTensors)."""
    return any(isinstance(param, DTensor) for param in model.parameters())


def save(checkpointing: Checkpointing, model: nn.Module, optimizer: torch.optim.Optimizer, result: Any,
         write: bool = True) -> None:
    """Writes the run after result.steps steps to checkpointing.path, atomically. A sharded model: every rank calls
    it (the state is gathered collectively), the one with write=True writes it."""
    if sharded(model):
        states = (dcp.get_model_state_dict(model, options=FULL),
                  dcp.get_optimizer_state_dict(model, optimizer, options=FULL))
    else:
        states = model.state_dict(), optimizer.state_dict()
    if write:
        _write(checkpointing, model, *states, result)
    checkpointing.saved_at, checkpointing.saved_step = time.monotonic(), result.steps


def _write(checkpointing: Checkpointing, model: nn.Module, model_state: dict, optimizer_state: dict,
           result: Any) -> None:
    device = next(model.parameters()).device
    rng = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(device)
    state = {"fingerprint": checkpointing.fingerprint, "step": result.steps, "model": model_state,
             "optimizer": optimizer_state, "result": dataclasses.asdict(result), "rng": rng,
             "extra": checkpointing.extra}
    path = checkpointing.path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def restore(checkpointing: Checkpointing, model: nn.Module, optimizer: torch.optim.Optimizer,
            result: Result) -> Result:
    """Loads the checkpoint at checkpointing.path into `model`, `optimizer`, torch's RNG and checkpointing.extra and
    returns its result so far; returns `result` unchanged when there is none, or when it is unreadable or of another
    fingerprint (then it is removed, said in one line on stderr)."""
    checkpointing.saved_at = time.monotonic()
    state = _read(checkpointing)
    if state is None:
        return result
    if sharded(model):  # every rank keeps its shards of the full state
        dcp.set_model_state_dict(model, state["model"], options=FULL)
        dcp.set_optimizer_state_dict(model, optimizer, state["optimizer"], options=FULL)
    else:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"]["cpu"])
    device = next(model.parameters()).device
    if device.type == "cuda" and "cuda" in state["rng"]:
        torch.cuda.set_rng_state(state["rng"]["cuda"], device)
    checkpointing.extra.update(state["extra"])
    checkpointing.saved_step = state["step"]
    return dataclasses.replace(result, **state["result"])


def discard(path: Path) -> None:
    """Removes the checkpoint at `path` and any temporary file a killed save left next to it."""
    path = Path(path)
    for stale in [path, *path.parent.glob(f".{path.name}.*.tmp")]:
        stale.unlink(missing_ok=True)


def _read(checkpointing: Checkpointing) -> dict[str, Any] | None:
    """The checkpoint's contents if it is there, readable and of checkpointing.fingerprint."""
    path = checkpointing.path
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        return None
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
        problem = f"unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    else:
        if isinstance(state, dict) and state.get("fingerprint") == checkpointing.fingerprint:
            return state
        problem = "of another configuration"
    print(f"checkpoint {path} is {problem}: removed, training starts from step 0", file=sys.stderr, flush=True)
    path.unlink(missing_ok=True)
    return None
