"""Probes ("taps"): named points in the forward pass whose sizes the coordinate check records.

Model code calls `tap(name, x)`; it does nothing unless a `Recorder` is active, and never inside torch.compile.
Every call is recorded, so a module used twice in one forward shows both calls (`name`, `name#2`) instead of hiding
the first.
"""
from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

_active: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("deltamup_recorder", default=None)


class Recorder:
    """Keeps a detached fp32 copy of every tapped tensor, by name, in call order."""

    def __init__(self) -> None:
        self.tensors: dict[str, Tensor] = {}

    def record(self, name: str, x: Tensor) -> None:
        key, n = name, 1
        while key in self.tensors:
            n += 1
            key = f"{name}#{n}"
        self.tensors[key] = x.detach().float().clone()


def tap(name: str, x: Tensor, owner: object | None = None) -> None:
    """Records x as `name`, or as `owner.name + "." + name` (a block's or mixer's probes). The owner's name is read
    only while recording: a compiled graph never depends on it, so every block of a model shares one."""
    if torch.compiler.is_compiling():
        return
    recorder = _active.get()
    if recorder is not None:
        recorder.record(name if owner is None else f"{owner.name}.{name}", x)


def recording() -> bool:
    return not torch.compiler.is_compiling() and _active.get() is not None


@contextmanager
def record() -> Iterator[Recorder]:
    recorder = Recorder()
    token = _active.set(recorder)
    try:
        yield recorder
    finally:
        _active.reset(token)
