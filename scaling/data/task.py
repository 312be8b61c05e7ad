"""The task protocol and registry (imports no task: the implementations register themselves)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from torch import Tensor

Batch = tuple[Tensor, Tensor]


class Task(Protocol):
    name: str
    vocab_size: int

    def train_batches(self, batch_size: int, seq_len: int, seed: int) -> Iterator[Batch]: ...

    def val_batches(self, batch_size: int, seq_len: int, count: int, seed: int) -> list[Batch]: ...


TASKS: dict[str, Callable[..., Task]] = {}


def register_task(name: str) -> Callable[[Callable[..., Task]], Callable[..., Task]]:
    def wrap(factory: Callable[..., Task]) -> Callable[..., Task]:
        TASKS[name] = factory
        return factory

    return wrap


def data_fingerprint(task: Task) -> str | None:
    """The task's data fingerprint (equal: the same data, byte for byte), None where the task has none."""
    return getattr(task, "fingerprint", None)


def get_task(spec: str | dict[str, Any]) -> Task:
    """A task from its name or a dict {"name": ..., **options}; ValueError names what is wrong."""
    options = {"name": spec} if isinstance(spec, str) else dict(spec)
    name = options.pop("name", None)
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(sorted(TASKS))}")
    try:
        return TASKS[name](**options)
    except TypeError as e:
        raise ValueError(f"task {name!r}: {e}") from None
