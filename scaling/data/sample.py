"""The embedded text sample: byte-level batches for coordinate checks and the CPU quick-start."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from .task import Batch, register_task

SAMPLE = Path(__file__).parent / "assets" / "sample.txt"


def sample_tokens() -> Tensor:
    """The sample as uint8 byte tokens [N]."""
    return torch.frombuffer(bytearray(SAMPLE.read_bytes()), dtype=torch.uint8)


def sample_batches(batch_size: int, seq_len: int, seed: int = 0,
                   split: tuple[str, float] | None = None) -> Iterator[tuple[Tensor, Tensor]]:
    """Endless random windows: (inputs [B, T], next-token targets [B, T]) as int64, deterministic in `seed`.

    split=("train" | "val", fraction): draw only from the first 1 − fraction or the last fraction of the text."""
    data = sample_tokens()
    if split is not None:
        cut = int(len(data) * (1 - split[1]))
        data = data[:cut] if split[0] == "train" else data[cut:]
    if len(data) <= seq_len + 1:
        raise ValueError(f"seq_len {seq_len} is too long for the sample's {len(data)} tokens")
    gen = torch.Generator().manual_seed(seed)
    offsets = torch.arange(seq_len + 1)
    while True:
        starts = torch.randint(0, len(data) - seq_len - 1, (batch_size,), generator=gen)
        window = data[starts[:, None] + offsets].long()
        yield window[:, :-1], window[:, 1:]


@register_task("sample")
@dataclass
class SampleText:
    """The embedded text sample (scaling/data/assets/sample.txt, 343 kB) as bytes; the last 5% is validation."""

    name: str = "sample"
    vocab_size: int = 256
    val_fraction: float = 0.05

    def train_batches(self, batch_size: int, seq_len: int, seed: int) -> Iterator[Batch]:
        return sample_batches(batch_size, seq_len, seed, split=("train", self.val_fraction))

    def val_batches(self, batch_size: int, seq_len: int, count: int, seed: int) -> list[Batch]:
        it = sample_batches(batch_size, seq_len, seed + 1_000_003, split=("val", self.val_fraction))
        return [next(it) for _ in range(count)]
