"""Checkpoints of a training run (scaling.train.train's `checkpointing`): a run killed mid-way continues from its
last checkpoint, and its result equals the uninterrupted run's, bit for bit on a CPU.

One file holds what the loop needs to go on: the steps done, the model's and the optimizer's state dicts, the
TrainResult so far, torch's CPU RNG state (and the CUDA RNG state of the model's device), the caller's `extra` dict
and a fingerprint of the run's configuration. Its size is about 12 bytes a parameter under AdamW (float32 weights and
Adam's two moments), 8 under SGD with momentum.

A save takes a snapshot of all of it on the spot: every tensor copied to the CPU memory (the snapshot holds one
such copy of the state while it is written), so the steps that follow do not change it. A background thread then
writes the snapshot, atomically (a temporary file in the same folder, flushed and fsynced, then os.replace): a kill
during a write leaves the previous checkpoint. One write at a time: a save first waits for the previous write to
end, and wait() waits for the last one; train() calls it before it returns or raises, so the file on disk is then
its last snapshot and no write is left to run. A write that fails raises its error at the next save or at wait().

A model sharded with FSDP (its parameters are DTensors, scaling.data_parallel) is saved whole: every rank gathers
the full model and optimizer state dicts onto the CPU (torch.distributed.checkpoint.state_dict, collective) and one
rank writes them; every rank reads the file and keeps its own shards.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

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
    writer: threading.Thread | None = field(default=None, init=False, repr=False, compare=False)  # pending write
    failure: BaseException | None = field(default=None, init=False, repr=False, compare=False)  # its error

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


def dtensor_class() -> type | None:
    """FSDP's DTensor class, or None while torch.distributed.tensor is not imported (then no tensor is a DTensor;
    importing it takes a second, in every trial process)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module.DTensor if module else None


def sharded(model: nn.Module) -> bool:
    """Whether `model`'s parameters are sharded over ranks (FSDP's DTensors)."""
    dtensor = dtensor_class()
    return dtensor is not None and any(isinstance(param, dtensor) for param in model.parameters())


def _full_state():
    """torch's distributed state-dict functions and the options that gather a sharded model's state whole, on
    the CPU (imported only for a sharded model)."""
    from torch.distributed.checkpoint import state_dict as dcp

    return dcp, dcp.StateDictOptions(full_state_dict=True, cpu_offload=True)


def save(checkpointing: Checkpointing, model: nn.Module, optimizer: torch.optim.Optimizer, result: Any,
         write: bool = True) -> None:
    """Takes a snapshot of the run after result.steps steps (on the CPU: later steps do not change it) and, with
    write=True, has a background thread write it to checkpointing.path, atomically. Waits first for the previous
    write to end and raises its error, if it failed. A sharded model: every rank calls it (the state is gathered
    collectively), the one with write=True writes it."""
    wait(checkpointing)
    if sharded(model):  # new CPU tensors, but for those the gather returned as they were (whole, on the CPU)
        dcp, full = _full_state()
        states = (dcp.get_model_state_dict(model, options=full),
                  dcp.get_optimizer_state_dict(model, optimizer, options=full))
        live = _storages((model.state_dict(), optimizer.state_dict()))
    else:
        states, live = (model.state_dict(), optimizer.state_dict()), None
    if write:
        states = _copied(states, live)
        device = next(model.parameters()).device
        rng = {"cpu": torch.get_rng_state()}
        if device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(device)
        state = {"fingerprint": checkpointing.fingerprint, "step": result.steps, "model": states[0],
                 "optimizer": states[1], "result": dataclasses.asdict(result), "rng": rng,
                 "extra": copy.deepcopy(checkpointing.extra)}
        writer = threading.Thread(target=_write, args=(checkpointing, state),
                                  name=f"checkpoint writer {checkpointing.path}")
        writer.start()
        checkpointing.writer = writer
    checkpointing.saved_at, checkpointing.saved_step = time.monotonic(), result.steps


def wait(checkpointing: Checkpointing) -> None:
    """Waits for checkpointing's pending write, if any, to end; raises its error if it failed (once)."""
    if checkpointing.writer is not None:
        checkpointing.writer.join()
        checkpointing.writer = None
    failure, checkpointing.failure = checkpointing.failure, None
    if failure is not None:
        raise failure


@contextlib.contextmanager
def writes(checkpointing: Checkpointing | None) -> Iterator[None]:
    """Waits for checkpointing's pending write (wait) when the block is left, also by an exception: a failed write's
    error is raised, or, when the block raised, noted on its exception."""
    try:
        yield
    except BaseException as error:
        if checkpointing is not None:
            try:
                wait(checkpointing)
            except Exception as failure:
                error.add_note(f"and writing the checkpoint failed: {failure!r}")
        raise
    if checkpointing is not None:
        wait(checkpointing)


def _write(checkpointing: Checkpointing, state: dict[str, Any]) -> None:
    """Writes `state` to checkpointing.path through a temporary file (the writer thread); an error is kept in
    checkpointing.failure."""
    path = checkpointing.path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    except BaseException as e:
        del state  # the snapshot's memory is freed now, not when the error is: the frames of its traceback held it
        traceback.clear_frames(e.__traceback__)
        e.add_note(f"writing the checkpoint {path}")
        checkpointing.failure = e


def _key(tensor: torch.Tensor) -> tuple[str, int]:
    """Where the memory `tensor` lives in (a DTensor: its local shard): (device, address)."""
    dtensor = dtensor_class()
    storage = (tensor.to_local() if dtensor is not None and isinstance(tensor, dtensor) else tensor).untyped_storage()
    return str(storage.device), storage.data_ptr()


@torch.no_grad()
def _storages(states: Any) -> set[tuple[str, int]]:
    """The _key of every tensor in `states` (nested dicts, lists, tuples)."""
    if isinstance(states, torch.Tensor):
        return {_key(states)}
    values = states.values() if isinstance(states, dict) else states if isinstance(states, (list, tuple)) else ()
    return set().union(*(_storages(value) for value in values))


@torch.no_grad()
def _copied(states: Any, only: set[tuple[str, int]] | None = None,
            copies: dict[tuple[str, int], torch.UntypedStorage] | None = None) -> Any:
    """`states` (nested dicts, lists, tuples) with its tensors' memory copied to the CPU, each storage once (tensors
    that share memory, e.g. tied weights, share the copy, as torch.save keeps them): every tensor's, or `only` those
    whose _key is one of these; other values as they are."""
    copies = {} if copies is None else copies
    if isinstance(states, torch.Tensor):
        key = _key(states)
        if only is not None and key not in only:
            return states
        if key not in copies:
            copies[key] = torch.UntypedStorage(states.untyped_storage().nbytes()).copy_(states.untyped_storage())
        return torch.empty(0, dtype=states.dtype).set_(copies[key], states.storage_offset(), states.size(),
                                                        states.stride())
    if isinstance(states, dict):
        return {key: _copied(value, only, copies) for key, value in states.items()}
    if isinstance(states, (list, tuple)):
        return type(states)(_copied(value, only, copies) for value in states)
    return states


def restore(checkpointing: Checkpointing, model: nn.Module, optimizer: torch.optim.Optimizer,
            result: Result) -> Result:
    """Loads the checkpoint at checkpointing.path into `model`, `optimizer`, torch's RNG and checkpointing.extra and
    returns its result so far; returns `result` unchanged when there is none, or when it is unreadable, of another
    fingerprint or of other param groups than `optimizer`'s (code that groups the parameters otherwise: then it is
    removed, said in one line on stderr, before anything is loaded)."""
    checkpointing.saved_at = time.monotonic()
    state = _read(checkpointing, optimizer)
    if state is None:
        return result
    if sharded(model):  # every rank keeps its shards of the full state
        dcp, full = _full_state()
        dcp.set_model_state_dict(model, state["model"], options=full)
        dcp.set_optimizer_state_dict(model, optimizer, state["optimizer"], options=full)
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


def _group_sizes(param_groups: list[Mapping[str, Any]]) -> list[int]:
    return [len(group["params"]) for group in param_groups]


def _read(checkpointing: Checkpointing, optimizer: torch.optim.Optimizer) -> dict[str, Any] | None:
    """The checkpoint's contents if it is there, readable, of checkpointing.fingerprint and of `optimizer`'s param
    groups (their number and sizes)."""
    path = checkpointing.path
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, NotADirectoryError):  # none there (NotADirectoryError: a parent is a file)
        return None
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
        problem = f"unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    else:
        if not isinstance(state, dict) or state.get("fingerprint") != checkpointing.fingerprint:
            problem = "of another configuration"
        elif _group_sizes(state["optimizer"]["param_groups"]) != _group_sizes(optimizer.param_groups):
            problem = "of other param groups (saved by code that groups the parameters otherwise)"
        else:
            return state
    print(f"checkpoint {path} is {problem}: removed, training starts from step 0", file=sys.stderr, flush=True)
    path.unlink(missing_ok=True)
    return None
