"""Data and tasks: everything a training run draws batches from, looked up by name.

    task = deltamup.scaling.data.get_task("sample")            # or a spec dict: {"name": "sample", ...}
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
    fingerprint: str | None          optional: what identifies its data, byte for byte (a prepared corpus: the
                                     first 16 hex digits of its tokens' sha256); data_fingerprint(task) reads it

Registered: sample (the embedded text), corpus (deltamup.scaling.data.corpus: the offline default corpus, users' text,
parquet or token files), and from deltamup.scaling.tasks s3, s4, a5, s5, zn, parity, mod_arithmetic,
mod_arithmetic_brackets. For seq_len, group words use it as the word length; formal languages as the padded
width (it must exceed the longest training expression, 40 by default).
"""
from __future__ import annotations

from deltamup.scaling import tasks as _tasks  # noqa: F401  (registers s3, s4, a5, s5, zn, parity, …)

from . import corpus, sample  # noqa: F401  (register corpus and sample)
from .task import TASKS, Batch, Task, data_fingerprint, get_task, register_task

__all__ = ["TASKS", "Batch", "Task", "data_fingerprint", "get_task", "register_task"]
