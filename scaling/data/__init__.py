"""Data and tasks: everything a training run draws batches from, looked up by name.

    task = scaling.data.get_task("sample")            # or a spec dict: {"name": "sample", ...}
    batches = task.train_batches(batch_size=8, seq_len=64, seed=0)   # endless iterator of (inputs, targets)
    val = task.val_batches(batch_size=8, seq_len=64, count=4, seed=0) # a fixed list

inputs, targets: [B, T] int64; a target of -100 is not supervised.

The task protocol
    name: str, vocab_size: int       inputs and targets share one vocabulary of vocab_size ids; build the model
                                     with ModelConfig(vocab_size=task.vocab_size)
    train_batches(batch_size, seq_len, seed) -> Iterator[Batch]    endless, deterministic given the seed
    val_batches(batch_size, seq_len, count, seed) -> list[Batch]   held out from training, deterministic
    evaluate(model, device, seed=0) -> dict[str, float]            optional: the task's own metrics (flat, scalar,
                                     e.g. acc@128, seq_acc@512, scaled_acc_test_len), for trials.parquet; callers
                                     check hasattr(task, "evaluate")

Registered: sample (the embedded text), corpus (scaling.data.corpus: the offline default corpus, users' text,
parquet or token files), and from scaling.tasks s3, s4, a5, s5, zn, parity, mod_arithmetic,
mod_arithmetic_brackets. For seq_len, group words use it as the word length; formal languages as the padded
width (it must exceed the longest training expression, 40 by default).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

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


@register_task("sample")
@dataclass
class SampleText:
    """The embedded text sample (scaling/data/assets/sample.txt, 343 kB) as bytes; the last 5% is validation."""

    name: str = "sample"
    vocab_size: int = 256
    val_fraction: float = 0.05

    def train_batches(self, batch_size: int, seq_len: int, seed: int) -> Iterator[Batch]:
        from .sample import sample_batches

        return sample_batches(batch_size, seq_len, seed, split=("train", self.val_fraction))

    def val_batches(self, batch_size: int, seq_len: int, count: int, seed: int) -> list[Batch]:
        from .sample import sample_batches

        it = sample_batches(batch_size, seq_len, seed + 1_000_003, split=("val", self.val_fraction))
        return [next(it) for _ in range(count)]


from . import corpus  # noqa: E402,F401  (registers corpus)
from scaling import tasks as _tasks  # noqa: E402,F401  (registers s3, s4, a5, s5, zn, parity, …)
